/* One thread fills 1 MiB buffers (each its own mmap: fixed mmap threshold), another
   frees them (munmap) right after reading one byte: the filler's stores must reach the
   trace before the munmap, although they wait in the filler's buffer. Prints the
   region of each buffer, one per line. */
#include <malloc.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#define N 64
#define SIZE (1 << 20)
static char *slot[N];
static int produced;
static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t cv = PTHREAD_COND_INITIALIZER;

static void *filler(void *arg) {
    (void)arg;
    for (int i = 0; i < N; i++) {
        char *p = malloc(SIZE);
        for (int k = 0; k < SIZE; k += 4096) p[k] = (char)i;
        pthread_mutex_lock(&mu);
        slot[i] = p;
        produced++;
        pthread_cond_signal(&cv);
        pthread_mutex_unlock(&mu);
    }
    return 0;
}

static void *freer(void *arg) {
    long *sum = arg;
    for (int i = 0; i < N; i++) {
        pthread_mutex_lock(&mu);
        while (produced <= i) pthread_cond_wait(&cv, &mu);
        char *p = slot[i];
        pthread_mutex_unlock(&mu);
        *sum += p[4096];
        printf("buffer %p\n", (void *)p);
        free(p);
    }
    return 0;
}

int main(void) {
    mallopt(M_MMAP_THRESHOLD, 64 * 1024);
    long sum = 0;
    pthread_t a, b;
    pthread_create(&a, 0, filler, 0);
    pthread_create(&b, 0, freer, &sum);
    pthread_join(a, 0);
    pthread_join(b, 0);
    printf("sum %ld\n", sum);
    return 0;
}
