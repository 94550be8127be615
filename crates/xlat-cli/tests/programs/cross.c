/* An instruction that crosses a page boundary at the end of a basic block, run 100000 times:
   QEMU 7.2 lists it in the block that ends before it and runs it as its own block. */
#include <stdio.h>
extern void crossfn(void);
__asm__(".text\n.balign 4096\n.skip 4096-16\n.globl crossfn\ncrossfn:\n"
        "nop\nnop\nnop\nnop\nnop\nnop\n"   /* 6 bytes: movabs starts at 0xffa */
        "movabs $0x1122334455667788, %rax\n" /* 10 bytes: crosses the page */
        "ret\n");
int main(void) {
    for (int i = 0; i < 100000; i++) crossfn();
    printf("ok\n");
    return 0;
}
