/* issue 35 (class 7): maps argv[1] files (default 300) whose paths are each about 3.8 KiB
   long (15 nested directories of 250 characters under the working directory), one page
   each, so that their names alone exceed the trace's 1 MiB end block. */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

int main(int argc, char **argv) {
    int n = argc > 1 ? atoi(argv[1]) : 300;
    char name[256];
    memset(name, 'd', 250);
    name[250] = 0;
    for (int i = 0; i < 15; i++) {
        mkdir(name, 0700);
        if (chdir(name) != 0) return 2;
    }
    long sum = 0;
    for (int i = 0; i < n; i++) {
        char f[32];
        snprintf(f, sizeof f, "f%04d", i);
        int fd = open(f, O_RDWR | O_CREAT | O_TRUNC, 0600);
        if (fd < 0 || ftruncate(fd, 4096) != 0) return 3;
        char *p = mmap(0, 4096, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
        if (p == MAP_FAILED) return 4;
        p[0] = (char)i;
        sum += p[0];
        munmap(p, 4096);
        close(fd);
    }
    printf("mapped %d files\n", n);
    return sum < 0;
}
