/* issue 35 (class 3): a traced program that signals xlat.
   "parent SIG...": sends each signal to its parent (xlat under QEMU), storing to a page
   between them, then prints "done" and exits 7.
   "group SIG...": the same to its whole process group (ignoring each signal itself first).
   "forkparent SIG...": a forked child sends them to its grandparent (xlat) and exits;
   the parent waits for it, prints "done" and exits 7.
   "owner": makes a pipe signal its parent (F_SETOWN, O_ASYNC: the kernel sends SIGIO
   on each write), writes to it, prints "done" and exits 7.
   "disp": prints the dispositions it started with: "ignored N..." (sigaction says
   SIG_IGN), "caught N..." (a handler), "blocked N..." (the signal mask), and the SigIgn
   and SigBlk lines of /proc/self/status. */
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static volatile char page[4096];

static void pause_a_little(void) {
    struct timespec t = {0, 30 * 1000 * 1000};
    for (int i = 0; i < 4096; i += 64) page[i] = (char)i;
    nanosleep(&t, 0);
}

static void send_all(pid_t to, int argc, char **argv) {
    for (int i = 2; i < argc; i++) {
        int sig = atoi(argv[i]);
        if (to == 0) signal(sig, SIG_IGN);
        if (kill(to, sig) != 0) perror("kill");
        pause_a_little();
    }
}

static void disp(void) {
    sigset_t mask;
    sigprocmask(SIG_BLOCK, 0, &mask);
    const char *what[3] = {"ignored", "caught", "blocked"};
    for (int k = 0; k < 3; k++) {
        printf("%s", what[k]);
        for (int sig = 1; sig < 65; sig++) {
            struct sigaction sa;
            if (sig == 32 || sig == 33 || sigaction(sig, 0, &sa) != 0) continue;
            int yes = k == 0   ? sa.sa_handler == SIG_IGN
                      : k == 1 ? sa.sa_handler != SIG_IGN && sa.sa_handler != SIG_DFL
                               : sigismember(&mask, sig);
            if (yes) printf(" %d", sig);
        }
        printf("\n");
    }
    FILE *f = fopen("/proc/self/status", "r");
    char line[256];
    while (f && fgets(line, sizeof line, f))
        if (!strncmp(line, "SigIgn:", 7) || !strncmp(line, "SigBlk:", 7)) printf("%s", line);
}

int main(int argc, char **argv) {
    const char *mode = argc > 1 ? argv[1] : "";
    if (!strcmp(mode, "disp")) {
        disp();
        return 0;
    }
    if (!strcmp(mode, "parent")) send_all(getppid(), argc, argv);
    if (!strcmp(mode, "group")) send_all(0, argc, argv);
    if (!strcmp(mode, "owner")) {
        int p[2];
        if (pipe(p) != 0 || fcntl(p[0], F_SETOWN, getppid()) != 0 ||
            fcntl(p[0], F_SETFL, O_ASYNC | O_NONBLOCK) != 0)
            return 2;
        for (int i = 0; i < 3; i++) {
            if (write(p[1], "x", 1) != 1) return 3;
            pause_a_little();
        }
    }
    if (!strcmp(mode, "forkparent")) {
        pid_t xlat = getppid();
        pid_t c = fork();
        if (c == 0) {
            send_all(xlat, argc, argv);
            _exit(0);
        }
        int st;
        waitpid(c, &st, 0);
    }
    printf("done\n");
    fflush(stdout);
    return 7;
}
