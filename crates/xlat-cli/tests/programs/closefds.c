/* Closes every descriptor above stderr (as daemons and Python's subprocess do), then
   dup2s stdout onto every descriptor from 500 to 600 and writes through one of them,
   touching 100 pages after each step. The plugin's socket must survive all of it. */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

static void touch(char *p, int round) {
    for (int i = 0; i < 100; i++) p[i * 4096] = (char)round;
}

int main(void) {
    char *p = mmap(0, 100 * 4096, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    printf("region %p\n", (void *)p);
    fflush(stdout);
    touch(p, 1);
    syscall(SYS_close_range, 3u, ~0u, 0u);
    touch(p, 2);
    for (int fd = 500; fd <= 600; fd++) dup2(1, fd);
    const char msg[] = "through 512\n";
    if (write(512, msg, strlen(msg)) < 0) return 9;
    touch(p, 3);
    for (int fd = 3; fd < 1024; fd++) close(fd);
    touch(p, 4);
    return 0;
}
