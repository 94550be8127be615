/* issue 14: a program that writes into the plugin's socket (a descriptor >= 512 under
   QEMU; none natively). argv[1]: "short" (a 3-byte message), "tag" (a chunk with an
   unknown record tag), "count" (a chunk header claiming more words than it has). Then it
   stores to 64 pages and exits 0. */
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

int main(int argc, char **argv) {
    const char *mode = argc > 1 ? argv[1] : "short";
    int hits = 0;
    for (int fd = 512; fd < 1024; fd++) {
        struct stat st;
        if (fstat(fd, &st) != 0 || !S_ISSOCK(st.st_mode)) continue;
        uint64_t w[3] = {0};
        if (strcmp(mode, "short") == 0) {
            send(fd, "abc", 3, MSG_NOSIGNAL);
        } else if (strcmp(mode, "tag") == 0) {
            w[0] = 1ull << 32; /* thread 0, one word */
            w[1] = 6ull << 60; /* no such tag */
            send(fd, w, 16, MSG_NOSIGNAL);
        } else {
            w[0] = 1000ull << 32; /* claims 1000 words, has 2 */
            send(fd, w, 24, MSG_NOSIGNAL);
        }
        hits++;
    }
    char *p = mmap(0, 64 * 4096, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    for (int i = 0; i < 64; i++) p[i * 4096] = 1;
    printf("wrote to %d sockets\n", hits);
    return 0;
}
