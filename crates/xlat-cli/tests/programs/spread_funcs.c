/* `spread.c`'s functions: hot<k> (~1 KiB) after cold<k> (~3 KiB), k = 10..169. The
   padding is code that never runs (the branch over it is never taken). */
#define PAD(n) if (a == -(n)) __asm__ volatile(".skip " #n ", 0x90")
#define F(k)                                                                           \
    __attribute__((noinline)) int cold##k(int a) { PAD(3000); return a + k; }         \
    __attribute__((noinline)) int hot##k(int a) { PAD(900); return a * 3 + k; }
#define F10(d) F(d##0) F(d##1) F(d##2) F(d##3) F(d##4) F(d##5) F(d##6) F(d##7) F(d##8) F(d##9)
F10(1) F10(2) F10(3) F10(4) F10(5) F10(6) F10(7) F10(8) F10(9) F10(10) F10(11) F10(12) F10(13)
F10(14) F10(15) F10(16)
