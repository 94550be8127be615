/* Writes known bytes to stdout (every byte value, then 200000 patterned bytes, with stdio
 * and with write(2)) and a known text to stderr; exits with 5. */
#include <stdio.h>
#include <unistd.h>
int main(void) {
    for (int i = 0; i < 256; i++) putchar(i);
    for (int i = 0; i < 200000; i++) putchar('a' + i % 26);
    fflush(stdout);
    write(1, "\nraw write\n", 11);
    fprintf(stderr, "to stderr: \x01\xff end\n");
    printf("last line without newline");
    return 5;
}
