/* Attribution: each function touches its own memory, a page at a time. */
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#define PAGES 64
__attribute__((noinline)) void touch_heap(char *h) {
    for (int i = 0; i < PAGES; i++) h[i * 4096L] = 1;
}
__attribute__((noinline)) void touch_anon(char *a) {
    for (int i = 0; i < PAGES; i++) a[i * 4096L] = 2;
}
__attribute__((noinline)) int touch_stack(void) {
    volatile char s[PAGES * 4096];
    for (int i = 0; i < PAGES; i++) s[i * 4096L] = 3;
    return s[0];
}
int main(void) {
    char *h = malloc(PAGES * 4096L);
    char *a = mmap(0, PAGES * 4096L, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (!h || a == MAP_FAILED) return 1;
    touch_heap(h);
    touch_anon(a);
    memset(a, 7, PAGES * 4096L);
    return touch_stack() == 3 ? 0 : 1;
}
