/* issue 14 (#! lines): prints its arguments, one "[arg]" per line, argv[0] included
   (a #! interpreter for the script tests). */
#include <stdio.h>
int main(int argc, char **argv) {
    for (int i = 0; i < argc; i++) printf("[%s]\n", argv[i]);
    return 0;
}
