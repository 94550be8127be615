/* Fills 1 MiB, maps a marker page (the mmap makes the plugin send everything before it),
 * prints both addresses, then dies as argv[1] says (segv, abort, kill) or execs echo. */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>
static char big[1 << 20];
int main(int argc, char **argv) {
    memset(big, 1, sizeof big);
    char *m = mmap(0, 4096, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    printf("big %p marker %p\n", (void *)big, (void *)m);
    fflush(stdout);
    if (argc > 1 && !strcmp(argv[1], "segv")) *(volatile int *)8 = 1;
    if (argc > 1 && !strcmp(argv[1], "abort")) abort();
    if (argc > 1 && !strcmp(argv[1], "kill")) kill(getpid(), SIGKILL);
    if (argc > 1 && !strcmp(argv[1], "exec")) execl("/bin/echo", "echo", "exec'd", (char *)0);
    return 3;
}
