/* N threads (argv[1], default 4), each ROUNDS times (argv[2], default 8): mmap 256 KiB,
 * touch every page, read them back, munmap. Every munmap removes 64 present pages of a
 * process the other threads run too: a shootdown on every CPU that runs it. */
#include <pthread.h>
#include <stdlib.h>
#include <sys/mman.h>
#define LEN (256 << 10)
static int rounds = 8;
static void *work(void *arg) {
    long id = (long)arg, s = 0;
    for (int r = 0; r < rounds; r++) {
        volatile char *p = mmap(0, LEN, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        if (p == MAP_FAILED) abort();
        for (long i = 0; i < LEN; i += 4096) p[i] = (char)(i + id);
        for (long i = 0; i < LEN; i += 4096) s += p[i];
        munmap((void *)p, LEN);
    }
    return (void *)s;
}
int main(int argc, char **argv) {
    int n = argc > 1 ? atoi(argv[1]) : 4;
    if (argc > 2) rounds = atoi(argv[2]);
    if (n < 1 || n > 64) return 2;
    pthread_t t[64];
    for (long i = 0; i < n; i++) pthread_create(&t[i], 0, work, (void *)i);
    for (int i = 0; i < n; i++) pthread_join(t[i], 0);
    return 0;
}
