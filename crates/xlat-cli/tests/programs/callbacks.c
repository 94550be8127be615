/* Hot code that no call edge inside the binary leads to: 40 comparison functions that
 * only the C library's qsort calls back, each after a 3 KB cold function (41 pages, more
 * than a 28-entry ITLB holds). A call-graph sort (lld's --call-graph-ordering-file) sees
 * no edge into them and leaves them where they are; an order by the instructions they run
 * packs them. Built with -O1 -fno-toplevel-reorder so functions stay in source order. */
#include <stdlib.h>
#define COLD(n) __attribute__((used, noinline)) void c##n(void) { __asm__ volatile(".skip 3000, 0x90"); }
#define CMP(n) COLD(n) \
    __attribute__((noinline)) int k##n(const void *a, const void *b) { \
        return (*(const int *)a ^ n) - (*(const int *)b ^ n); }
CMP(0)
CMP(1)
CMP(2)
CMP(3)
CMP(4)
CMP(5)
CMP(6)
CMP(7)
CMP(8)
CMP(9)
CMP(10)
CMP(11)
CMP(12)
CMP(13)
CMP(14)
CMP(15)
CMP(16)
CMP(17)
CMP(18)
CMP(19)
CMP(20)
CMP(21)
CMP(22)
CMP(23)
CMP(24)
CMP(25)
CMP(26)
CMP(27)
CMP(28)
CMP(29)
CMP(30)
CMP(31)
CMP(32)
CMP(33)
CMP(34)
CMP(35)
CMP(36)
CMP(37)
CMP(38)
CMP(39)

typedef int (*cmp_fn)(const void *, const void *);
static cmp_fn cmps[] = {
    k0,
    k1,
    k2,
    k3,
    k4,
    k5,
    k6,
    k7,
    k8,
    k9,
    k10,
    k11,
    k12,
    k13,
    k14,
    k15,
    k16,
    k17,
    k18,
    k19,
    k20,
    k21,
    k22,
    k23,
    k24,
    k25,
    k26,
    k27,
    k28,
    k29,
    k30,
    k31,
    k32,
    k33,
    k34,
    k35,
    k36,
    k37,
    k38,
    k39
};

int main(void) {
    int a[8];
    int sum = 0;
    for (int r = 0; r < 200; r++) {
        for (int k = 0; k < 40; k++) {
            for (int i = 0; i < 8; i++)
                a[i] = (i * 7 + r + k) & 15;
            qsort(a, 8, sizeof a[0], cmps[k]);
            sum += a[0];
        }
    }
    return sum == 12345;
}
