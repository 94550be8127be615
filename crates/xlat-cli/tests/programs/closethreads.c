/* A worker thread stores into 100 pages, round after round, while the main thread
   closes every descriptor and dup2s over the plugin's socket, again and again (up to 40
   rounds): the worker's records, sent while the socket is being handed over, must all
   arrive. */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdio.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>
#define ROUNDS 2000
static char *region;
static volatile int done;

static void *worker(void *arg) {
    (void)arg;
    for (int r = 0; r < ROUNDS; r++)
        for (int i = 0; i < 100; i++) region[i * 4096] = (char)r;
    done = 1;
    return 0;
}

int main(void) {
    region = mmap(0, 100 * 4096, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    printf("region %p\n", (void *)region);
    fflush(stdout);
    pthread_t t;
    pthread_create(&t, 0, worker, 0);
    /* A bounded number of handovers (each costs the collector a connection). */
    int k = 0;
    do {
        syscall(SYS_close_range, 3u, ~0u, 0u);
        for (int fd = 500; fd <= 520; fd++) dup2(1, fd);
        usleep(200);
    } while (!done && ++k < 40);
    pthread_join(t, 0);
    printf("done\n");
    return 0;
}
