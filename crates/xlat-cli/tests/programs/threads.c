/* Four threads at the same time, each adding to 16 pages of its own buffer ROUNDS times
 * (argv[1], default 10): 16 x ROUNDS loads and stores each. Prints the base of the buffers
 * (thread i owns base + i * 16 pages). */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
static char buf[4][16 << 12];
static int rounds = 10;
static void *work(void *a) {
    volatile char *p = a;
    for (int r = 0; r < rounds; r++)
        for (int i = 0; i < 16; i++) p[i << 12] += 1;
    return 0;
}
int main(int argc, char **argv) {
    if (argc > 1) rounds = atoi(argv[1]);
    pthread_t t[4];
    for (int i = 0; i < 4; i++) pthread_create(&t[i], 0, work, buf[i]);
    for (int i = 0; i < 4; i++) pthread_join(t[i], 0);
    printf("buffers %p\n", (void *)buf);
    printf("threads done\n");
    return 0;
}
