/* lmbench's process, VM and IPC operations as one small static program, for a real kernel
 * traced whole (experiments/guest-lmbench.sh). `lmb OP N` runs N operations of OP after the
 * same setup, so two runs (N and 0) differ by exactly N operations:
 *   fork   fork + _exit + waitpid                    (lat_proc fork)
 *   exec   fork + execve(self, "hello") + waitpid     (lat_proc exec)
 *   fault  first touch of N pages of a fresh anonymous mapping (lat_pagefault, anonymous)
 *   mmap   mmap 64 KiB + touch each page + munmap     (lat_mmap, anonymous, 64 KiB)
 *   ctx    N round trips of one byte between two processes over two pipes (lat_ctx -s 0 2:
 *          two switches each)
 *   pipe   N x 64 KiB written through a pipe to a reading child (bw_pipe)
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

static void die(const char *what) { perror(what); exit(2); }

int main(int argc, char **argv) {
    if (argc == 2 && !strcmp(argv[1], "hello")) return 0;
    if (argc != 3) { fprintf(stderr, "usage: lmb fork|exec|fault|mmap|ctx|pipe N\n"); return 2; }
    const char *op = argv[1];
    long n = atol(argv[2]);
    long page = sysconf(_SC_PAGESIZE);
    if (!strcmp(op, "fork") || !strcmp(op, "exec")) {
        for (long i = 0; i < n; i++) {
            pid_t p = fork();
            if (p < 0) die("fork");
            if (p == 0) {
                if (op[0] == 'e') { execl("/proc/self/exe", "lmb", "hello", (char *)0); die("exec"); }
                _exit(0);
            }
            if (waitpid(p, 0, 0) != p) die("waitpid");
        }
    } else if (!strcmp(op, "fault")) {
        char *m = mmap(0, (n + 1) * page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        if (m == MAP_FAILED) die("mmap");
        madvise(m, (n + 1) * page, MADV_NOHUGEPAGE);
        for (long i = 0; i < n; i++) m[i * page] = 1;
    } else if (!strcmp(op, "mmap")) {
        for (long i = 0; i < n; i++) {
            char *m = mmap(0, 64 << 10, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
            if (m == MAP_FAILED) die("mmap");
            for (long o = 0; o < 64 << 10; o += page) m[o] = 1;
            munmap(m, 64 << 10);
        }
    } else if (!strcmp(op, "ctx") || !strcmp(op, "pipe")) {
        int a[2], b[2];
        char c = 0;
        if (pipe(a) || pipe(b)) die("pipe");
        pid_t p = fork();
        if (p < 0) die("fork");
        static char buf[64 << 10];
        if (p == 0) {
            close(a[1]);
            if (op[0] == 'c') {
                while (read(a[0], &c, 1) == 1) if (write(b[1], &c, 1) != 1) _exit(1);
            } else {
                while (read(a[0], buf, sizeof buf) > 0) {}
            }
            _exit(0);
        }
        close(a[0]);
        for (long i = 0; i < n; i++) {
            if (op[0] == 'c') {
                if (write(a[1], &c, 1) != 1 || read(b[0], &c, 1) != 1) die("ping");
            } else {
                for (size_t off = 0; off < sizeof buf;) {
                    ssize_t w = write(a[1], buf + off, sizeof buf - off);
                    if (w <= 0) die("write");
                    off += w;
                }
            }
        }
        close(a[1]);
        if (waitpid(p, 0, 0) != p) die("waitpid");
    } else {
        fprintf(stderr, "unknown operation %s\n", op);
        return 2;
    }
    return 0;
}
