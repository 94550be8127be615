/* Issue 19's shape: a hot call chain h0 -> h1 -> ... -> h47 whose functions are spread
 * over 36 pages by 3 KB cold functions between them (as a syscall path in a kernel), more
 * pages than a 28-entry ITLB holds. Built with -O1 -fno-toplevel-reorder so functions
 * stay in source order. */
#define COLD(n) __attribute__((used, noinline)) void c##n(void) { __asm__ volatile(".skip 3000, 0x90"); }
volatile int sink;
COLD(0)
__attribute__((noinline)) void h1(int x);
__attribute__((noinline)) void h0(int x) { sink += x; h1(x + 1); }
COLD(1)
__attribute__((noinline)) void h2(int x);
__attribute__((noinline)) void h1(int x) { sink += x; h2(x + 1); }
COLD(2)
__attribute__((noinline)) void h3(int x);
__attribute__((noinline)) void h2(int x) { sink += x; h3(x + 1); }
COLD(3)
__attribute__((noinline)) void h4(int x);
__attribute__((noinline)) void h3(int x) { sink += x; h4(x + 1); }
COLD(4)
__attribute__((noinline)) void h5(int x);
__attribute__((noinline)) void h4(int x) { sink += x; h5(x + 1); }
COLD(5)
__attribute__((noinline)) void h6(int x);
__attribute__((noinline)) void h5(int x) { sink += x; h6(x + 1); }
COLD(6)
__attribute__((noinline)) void h7(int x);
__attribute__((noinline)) void h6(int x) { sink += x; h7(x + 1); }
COLD(7)
__attribute__((noinline)) void h8(int x);
__attribute__((noinline)) void h7(int x) { sink += x; h8(x + 1); }
COLD(8)
__attribute__((noinline)) void h9(int x);
__attribute__((noinline)) void h8(int x) { sink += x; h9(x + 1); }
COLD(9)
__attribute__((noinline)) void h10(int x);
__attribute__((noinline)) void h9(int x) { sink += x; h10(x + 1); }
COLD(10)
__attribute__((noinline)) void h11(int x);
__attribute__((noinline)) void h10(int x) { sink += x; h11(x + 1); }
COLD(11)
__attribute__((noinline)) void h12(int x);
__attribute__((noinline)) void h11(int x) { sink += x; h12(x + 1); }
COLD(12)
__attribute__((noinline)) void h13(int x);
__attribute__((noinline)) void h12(int x) { sink += x; h13(x + 1); }
COLD(13)
__attribute__((noinline)) void h14(int x);
__attribute__((noinline)) void h13(int x) { sink += x; h14(x + 1); }
COLD(14)
__attribute__((noinline)) void h15(int x);
__attribute__((noinline)) void h14(int x) { sink += x; h15(x + 1); }
COLD(15)
__attribute__((noinline)) void h16(int x);
__attribute__((noinline)) void h15(int x) { sink += x; h16(x + 1); }
COLD(16)
__attribute__((noinline)) void h17(int x);
__attribute__((noinline)) void h16(int x) { sink += x; h17(x + 1); }
COLD(17)
__attribute__((noinline)) void h18(int x);
__attribute__((noinline)) void h17(int x) { sink += x; h18(x + 1); }
COLD(18)
__attribute__((noinline)) void h19(int x);
__attribute__((noinline)) void h18(int x) { sink += x; h19(x + 1); }
COLD(19)
__attribute__((noinline)) void h20(int x);
__attribute__((noinline)) void h19(int x) { sink += x; h20(x + 1); }
COLD(20)
__attribute__((noinline)) void h21(int x);
__attribute__((noinline)) void h20(int x) { sink += x; h21(x + 1); }
COLD(21)
__attribute__((noinline)) void h22(int x);
__attribute__((noinline)) void h21(int x) { sink += x; h22(x + 1); }
COLD(22)
__attribute__((noinline)) void h23(int x);
__attribute__((noinline)) void h22(int x) { sink += x; h23(x + 1); }
COLD(23)
__attribute__((noinline)) void h24(int x);
__attribute__((noinline)) void h23(int x) { sink += x; h24(x + 1); }
COLD(24)
__attribute__((noinline)) void h25(int x);
__attribute__((noinline)) void h24(int x) { sink += x; h25(x + 1); }
COLD(25)
__attribute__((noinline)) void h26(int x);
__attribute__((noinline)) void h25(int x) { sink += x; h26(x + 1); }
COLD(26)
__attribute__((noinline)) void h27(int x);
__attribute__((noinline)) void h26(int x) { sink += x; h27(x + 1); }
COLD(27)
__attribute__((noinline)) void h28(int x);
__attribute__((noinline)) void h27(int x) { sink += x; h28(x + 1); }
COLD(28)
__attribute__((noinline)) void h29(int x);
__attribute__((noinline)) void h28(int x) { sink += x; h29(x + 1); }
COLD(29)
__attribute__((noinline)) void h30(int x);
__attribute__((noinline)) void h29(int x) { sink += x; h30(x + 1); }
COLD(30)
__attribute__((noinline)) void h31(int x);
__attribute__((noinline)) void h30(int x) { sink += x; h31(x + 1); }
COLD(31)
__attribute__((noinline)) void h32(int x);
__attribute__((noinline)) void h31(int x) { sink += x; h32(x + 1); }
COLD(32)
__attribute__((noinline)) void h33(int x);
__attribute__((noinline)) void h32(int x) { sink += x; h33(x + 1); }
COLD(33)
__attribute__((noinline)) void h34(int x);
__attribute__((noinline)) void h33(int x) { sink += x; h34(x + 1); }
COLD(34)
__attribute__((noinline)) void h35(int x);
__attribute__((noinline)) void h34(int x) { sink += x; h35(x + 1); }
COLD(35)
__attribute__((noinline)) void h36(int x);
__attribute__((noinline)) void h35(int x) { sink += x; h36(x + 1); }
COLD(36)
__attribute__((noinline)) void h37(int x);
__attribute__((noinline)) void h36(int x) { sink += x; h37(x + 1); }
COLD(37)
__attribute__((noinline)) void h38(int x);
__attribute__((noinline)) void h37(int x) { sink += x; h38(x + 1); }
COLD(38)
__attribute__((noinline)) void h39(int x);
__attribute__((noinline)) void h38(int x) { sink += x; h39(x + 1); }
COLD(39)
__attribute__((noinline)) void h40(int x);
__attribute__((noinline)) void h39(int x) { sink += x; h40(x + 1); }
COLD(40)
__attribute__((noinline)) void h41(int x);
__attribute__((noinline)) void h40(int x) { sink += x; h41(x + 1); }
COLD(41)
__attribute__((noinline)) void h42(int x);
__attribute__((noinline)) void h41(int x) { sink += x; h42(x + 1); }
COLD(42)
__attribute__((noinline)) void h43(int x);
__attribute__((noinline)) void h42(int x) { sink += x; h43(x + 1); }
COLD(43)
__attribute__((noinline)) void h44(int x);
__attribute__((noinline)) void h43(int x) { sink += x; h44(x + 1); }
COLD(44)
__attribute__((noinline)) void h45(int x);
__attribute__((noinline)) void h44(int x) { sink += x; h45(x + 1); }
COLD(45)
__attribute__((noinline)) void h46(int x);
__attribute__((noinline)) void h45(int x) { sink += x; h46(x + 1); }
COLD(46)
__attribute__((noinline)) void h47(int x);
__attribute__((noinline)) void h46(int x) { sink += x; h47(x + 1); }
COLD(47)
__attribute__((noinline)) void h47(int x) { sink += x; sink = x; }
int main(void) { for (int i = 0; i < 2000; i++) h0(i); return 0; }
