/* issue 14 (signals, death): stores to a 1 MiB region for argv[1] seconds (default 60).
   argv[2]: "fork" (a forked child spins too), "catch" (SIGTERM/SIGHUP print "caught N"
   and exit 3), "ignore" (SIGTERM is ignored). Each process prints "pid N" first. */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

static void caught(int sig) {
    printf("caught %d\n", sig);
    fflush(stdout);
    _exit(3);
}

int main(int argc, char **argv) {
    int secs = argc > 1 ? atoi(argv[1]) : 60;
    const char *mode = argc > 2 ? argv[2] : "";
    if (strcmp(mode, "catch") == 0) {
        signal(SIGTERM, caught);
        signal(SIGHUP, caught);
    }
    if (strcmp(mode, "ignore") == 0) signal(SIGTERM, SIG_IGN);
    if (strcmp(mode, "fork") == 0) fork();
    char *p = mmap(0, 1 << 20, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    printf("pid %d\n", (int)getpid());
    fflush(stdout);
    time_t end = time(0) + secs;
    unsigned long i = 0;
    while (time(0) < end)
        for (int k = 0; k < 4096; k++) p[(i++ * 64) & ((1 << 20) - 1)] = (char)k;
    return 0;
}
