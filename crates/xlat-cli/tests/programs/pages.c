/* Exactness: 257 pages, one 4-byte store each, in the order page (i * 97) % 257, at offset
 * 4 * i within the page. Prints the region's base address. */
#include <stdio.h>
#include <sys/mman.h>
#define N 257
int main(void) {
    char *p = mmap(0, N * 4096L, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) return 1;
    for (int i = 0; i < N; i++)
        *(volatile int *)(p + (long)((i * 97) % N) * 4096 + 4 * i) = i;
    printf("%p\n", (void *)p);
    return 0;
}
