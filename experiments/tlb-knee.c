/* An independent TLB knee measurement (issue 39): a dependent pointer chase over N pages,
 * one 64-byte line per page at a page-varying offset (so lines spread over cache sets),
 * pages in a random cyclic order, against a dense control (the same number of lines packed
 * contiguously). Prints pages, ns/load random, ns/load control, excess.
 * Build: cc -O2 -o tlb-knee tlb-knee.c   Run: ./tlb-knee [min_pages max_pages ratio]
 * It shares no code with xlat's probe. */
#define _GNU_SOURCE
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <time.h>

static uint64_t rng = 88172645463325252ull;
static uint64_t next(void) { rng ^= rng << 13; rng ^= rng >> 7; rng ^= rng << 17; return rng; }

static double now_ns(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC_RAW, &t);
    return t.tv_sec * 1e9 + t.tv_nsec;
}

/* ns per load of a chase through `n` slots at addresses base + slot(i). */
static double chase(char *base, size_t n, size_t stride, int spread) {
    size_t *perm = malloc(n * sizeof *perm);
    for (size_t i = 0; i < n; i++) perm[i] = i;
    for (size_t i = n - 1; i > 0; i--) { size_t j = next() % (i + 1); size_t t = perm[i]; perm[i] = perm[j]; perm[j] = t; }
    #define SLOT(i) (base + (i) * stride + (spread ? ((i) % 64) * 64 : 0))
    for (size_t k = 0; k < n; k++) *(void **)SLOT(perm[k]) = SLOT(perm[(k + 1) % n]);
    void **p = (void **)SLOT(perm[0]);
    size_t loads = n * 8 > 2000000 ? n * 8 : 2000000;
    for (size_t i = 0; i < n; i++) p = *p; /* warm */
    double best = 1e30;
    for (int rep = 0; rep < 5; rep++) {
        double t0 = now_ns();
        for (size_t i = 0; i < loads; i++) p = *p;
        double t = (now_ns() - t0) / loads;
        if (t < best) best = t;
    }
    if (p == NULL) puts("");
    free(perm);
    return best;
}

int main(int argc, char **argv) {
    size_t lo = argc > 1 ? strtoul(argv[1], 0, 0) : 16, hi = argc > 2 ? strtoul(argv[2], 0, 0) : 16384;
    double ratio = argc > 3 ? atof(argv[3]) : 1.05;
    size_t bytes = hi * 4096 + 4096;
    char *big = mmap(0, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    char *dense = mmap(0, hi * 64 + 4096, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (big == MAP_FAILED || dense == MAP_FAILED) return 1;
    madvise(big, bytes, MADV_NOHUGEPAGE);
    for (size_t i = 0; i < bytes; i += 4096) big[i] = 1;
    for (size_t i = 0; i < hi * 64 + 4096; i += 4096) dense[i] = 1;
    printf("pages\trandom_ns\tcontrol_ns\texcess_ns\n");
    for (double x = lo; x <= hi; x = x * ratio > x + 1 ? x * ratio : x + 1) {
        size_t n = (size_t)x;
        double r = chase(big, n, 4096, 1), c = chase(dense, n, 64, 0);
        printf("%zu\t%.2f\t%.2f\t%.2f\n", n, r, c, r - c);
        fflush(stdout);
    }
    return 0;
}
