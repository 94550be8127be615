/* issue 14: mmap(PROT_NONE, MAP_POPULATE) is legal on Linux. 16 such pages, then
   mprotect to read-write, a store to each page and munmap. */
#include <stdio.h>
#include <sys/mman.h>

int main(void) {
    char *p = mmap(0, 16 * 4096, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_POPULATE, -1, 0);
    if (p == MAP_FAILED) return 1;
    printf("region %p\n", (void *)p);
    fflush(stdout);
    if (mprotect(p, 16 * 4096, PROT_READ | PROT_WRITE) != 0) return 2;
    for (int i = 0; i < 16; i++) p[i * 4096] = 1;
    return munmap(p, 16 * 4096) != 0;
}
