/* `xlat layout --algorithm tuned` (issue 42), with `spread_funcs.c`: 160 hot functions
   of ~1 KiB (37 pages once packed), each after a 3 KiB cold one, called in turn with C
   library calls between. Packed, the hot code still outgrows a 2-way 64-entry ITLB's sets
   (ppc603): which sets its pages fall in decides the misses, not how many there are.
   Argument: iterations (default 300). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define D(k) int hot##k(int);
#define D10(d) D(d##0) D(d##1) D(d##2) D(d##3) D(d##4) D(d##5) D(d##6) D(d##7) D(d##8) D(d##9)
D10(1) D10(2) D10(3) D10(4) D10(5) D10(6) D10(7) D10(8) D10(9) D10(10) D10(11) D10(12) D10(13)
D10(14) D10(15) D10(16)
#define C(k) hot##k,
#define C10(d) C(d##0) C(d##1) C(d##2) C(d##3) C(d##4) C(d##5) C(d##6) C(d##7) C(d##8) C(d##9)
static int (*const hots[])(int) = {C10(1) C10(2) C10(3) C10(4) C10(5) C10(6) C10(7) C10(8)
                                   C10(9) C10(10) C10(11) C10(12) C10(13) C10(14) C10(15)
                                   C10(16)};

static int by_byte(const void *a, const void *b) {
    return *(const char *)a - *(const char *)b;
}

int main(int argc, char **argv) {
    int n = argc > 1 ? atoi(argv[1]) : 300, s = 0;
    char buf[256];
    for (int i = 0; i < n; i++)
        for (unsigned k = 0; k < sizeof hots / sizeof *hots; k++) {
            s += hots[k](i);
            if (k % 16 == 0) {
                snprintf(buf, sizeof buf, "%d %s", s, "x");
                s += (int)strlen(buf);
                qsort(buf, 8, 1, by_byte);
            }
        }
    printf("%d\n", s);
    return 0;
}
