/* issue 35 (class 7): re-execs itself once, as Go programs, busybox and runc do, through
   argv[1]: "self" (/proc/self/exe), "pid" (/proc/PID/exe), "thread" (/proc/thread-self/exe),
   "link" (a symbolic link to /proc/self/exe, argv[2]), "relative" (exe from /proc/self).
   The second run prints "again PATH" (its own /proc/self/exe) and exits 0. */
#include <stdio.h>
#include <string.h>
#include <unistd.h>

int main(int argc, char **argv) {
    if (argc > 1 && !strcmp(argv[1], "again")) {
        char self[4096];
        ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
        self[n < 0 ? 0 : n] = 0;
        printf("again %s\n", self);
        return 0;
    }
    const char *mode = argc > 1 ? argv[1] : "self";
    char path[4096] = "/proc/self/exe";
    if (!strcmp(mode, "pid")) snprintf(path, sizeof path, "/proc/%d/exe", (int)getpid());
    if (!strcmp(mode, "thread")) strcpy(path, "/proc/thread-self/exe");
    if (!strcmp(mode, "link") && argc > 2) {
        unlink(argv[2]);
        if (symlink("/proc/self/exe", argv[2]) != 0) return 2;
        strcpy(path, argv[2]);
    }
    if (!strcmp(mode, "relative")) {
        if (chdir("/proc/self") != 0) return 2;
        strcpy(path, "exe");
    }
    char *args[] = {argv[0], "again", 0};
    execv(path, args);
    perror("execv");
    return 1;
}
