/* A loop-heavy program for comparing counts with valgrind lackey: ROUNDS (argv[1]) x 4096
 * iterations of ten scalar instructions with one load and one read-modify-write (lackey
 * 'M') each. No libc call and no string instruction inside the loop; compile with
 * -fno-tree-vectorize so the accesses stay scalar. */
#include <stdio.h>
#include <stdlib.h>
#define N 4096
static long a[N];
int main(int argc, char **argv) {
    int rounds = argc > 1 ? atoi(argv[1]) : 100;
    long s = argc;
    for (int r = 0; r < rounds; r++)
        for (int i = 0; i < N; i++) {
            s += a[i] ^ i;
            a[(i * 7) & (N - 1)] += s;
        }
    printf("%ld\n", s);
    return 0;
}
