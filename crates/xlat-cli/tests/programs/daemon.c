/* Daemon pattern: the parent exits at once; the child, still running, closes every
   descriptor and then touches 100 pages. The capture must wait for it and keep them. */
#define _GNU_SOURCE
#include <stdio.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

int main(void) {
    char *p = mmap(0, 100 * 4096, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    printf("region %p\n", (void *)p);
    fflush(stdout);
    if (fork() != 0) return 0;
    usleep(200 * 1000);
    syscall(SYS_close_range, 0u, ~0u, 0u);
    usleep(200 * 1000);
    for (int i = 0; i < 100; i++) p[i * 4096] = 1;
    return 0;
}
