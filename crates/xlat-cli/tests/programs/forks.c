/* Three children running at the same time: each adds to the 64 pages its parent touched
 * (copy on write), ROUNDS (200) times, and exits with 10 + its index; the parent waits for
 * them in order, prints what it saw and exits with 7. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>
#define ROUNDS 200
int main(void) {
    char *p = mmap(0, 64 << 12, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    for (int i = 0; i < 64; i++) p[i << 12] = 1;
    printf("region %p\n", (void *)p);
    fflush(stdout); /* or the children would print it again */
    pid_t c[3];
    for (int k = 0; k < 3; k++) {
        c[k] = fork();
        if (c[k] < 0) return 1;
        if (c[k] == 0) {
            for (int r = 0; r < ROUNDS; r++)
                for (int i = 0; i < 64; i++) ((volatile char *)p)[i << 12] += 2;
            _exit(10 + k);
        }
    }
    for (int k = 0; k < 3; k++) {
        int st;
        waitpid(c[k], &st, 0);
        printf("child %d exited %d\n", k, WIFEXITED(st) ? WEXITSTATUS(st) : -1);
    }
    printf("forks done %d\n", p[0]);
    return 7;
}
