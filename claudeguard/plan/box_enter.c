/* claudeguard: runs one Bash call in the session's box (claudeguard/plan/box_enter.py;
 * docs/design.md, "The session's box"). Built once per machine from this file by the guard.
 *
 *   box-enter LIVE_FILE CWD_FILE BG_DIR COMMAND -- FALLBACK...
 *
 * LIVE_FILE: "pid start user mnt pid ipc net bgdir", the session's box as the launcher started it
 * (the pid of its first process, that process's start time, its namespaces' inodes, the dir of
 * background output it shows). CWD_FILE: where the CLI wants the command's last directory (or
 * ""). BG_DIR: the background output dir the call's own box would show (or ""). FALLBACK: the
 * call's own box (the box script's bwrap argv, ending in SHELL -c COMMAND), run whenever the
 * session's box is not exactly as the launcher left it: never no box. The seccomp filter is read
 * from fd 9, as the fallback's bwrap reads it. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <linux/filter.h>
#include <linux/capability.h>
#include <linux/nsfs.h>
#include <linux/seccomp.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

static char **fallback;

/* why the session's box was not entered: said on stderr when CLAUDEGUARD_BOX_ENTER_SAY is set */
static void run_fallback_because(const char *why) {
    if (getenv("CLAUDEGUARD_BOX_ENTER_SAY")) fprintf(stderr, "claudeguard: a box of the call's own: %s\n", why);
    execv(fallback[0], fallback);
    fprintf(stderr, "claudeguard: cannot start the box (%s): %s\n", fallback[0], strerror(errno));
    _exit(126);
}

static void fail(const char *what) {
    fprintf(stderr, "claudeguard: the session's box: %s: %s\n", what, strerror(errno));
    _exit(126);
}

/* field 22 of /proc/PID/stat: the start time, in clock ticks since boot */
static int start_of(const char *pid, char *out, size_t size) {
    char path[64], buf[1024];
    snprintf(path, sizeof path, "/proc/%s/stat", pid);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return -1;
    ssize_t n = read(fd, buf, sizeof buf - 1);
    close(fd);
    if (n <= 0) return -1;
    buf[n] = 0;
    char *p = strrchr(buf, ')');
    if (!p) return -1;
    p += 2;
    for (int field = 3; field < 22; field++) {
        p = strchr(p, ' ');
        if (!p) return -1;
        p++;
    }
    size_t len = strcspn(p, " ");
    if (len == 0 || len >= size) return -1;
    memcpy(out, p, len);
    out[len] = 0;
    return 0;
}

static ino_t ino_of_fd(int fd) {
    struct stat st;
    return fstat(fd, &st) == 0 ? st.st_ino : 0;
}

static ino_t own_ino(const char *name) {
    char path[64];
    struct stat st;
    snprintf(path, sizeof path, "/proc/self/ns/%s", name);
    return stat(path, &st) == 0 ? st.st_ino : 0;
}

static int status_of(int status) {
    return WIFSIGNALED(status) ? 128 + WTERMSIG(status) : WEXITSTATUS(status);
}

static void wait_and_exit(pid_t child) {
    int status;
    while (waitpid(child, &status, 0) < 0)
        if (errno != EINTR) _exit(126);
    _exit(status_of(status));
}

int main(int argc, char **argv) {
    if (argc < 7 || strcmp(argv[5], "--") != 0) {
        fprintf(stderr, "claudeguard: the box's entry was called wrongly\n");
        return 126;
    }
    const char *live = argv[1], *cwd_file = argv[2], *bg = argv[3];
    char *command = argv[4];
    fallback = argv + 6;
    int nfall = argc - 6;
    if (nfall < 3) run_fallback_because("no shell in the fallback");

    char path[4096], line[1024];
    int fd = open(live, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0) run_fallback_because("no live file");
    ssize_t n = read(fd, line, sizeof line - 1);
    close(fd);
    if (n <= 0) run_fallback_because("an empty live file");
    line[n] = 0;
    char pid[32], start[32], livebg[2048];
    unsigned long long want[5];
    if (sscanf(line, "%31[0-9] %31[0-9] %llu %llu %llu %llu %llu %2047s", pid, start, &want[0], &want[1],
               &want[2], &want[3], &want[4], livebg) != 8)
        run_fallback_because("a live file not as written");
    if (bg[0] && strcmp(bg, livebg) != 0) run_fallback_because("another background output dir");
    char now[32];
    if (start_of(pid, now, sizeof now) != 0 || strcmp(now, start) != 0) run_fallback_because("the box's process is gone");
    static const char *names[5] = {"user", "mnt", "pid", "ipc", "net"};
    static const int flags[5] = {CLONE_NEWUSER, CLONE_NEWNS, CLONE_NEWPID, CLONE_NEWIPC, CLONE_NEWNET};
    int nsfd[5];
    ino_t its[5], own[5];  /* our own, read before any setns: /proc/self is another's after it */
    for (int i = 0; i < 5; i++) {
        own[i] = own_ino(names[i]);
        snprintf(path, sizeof path, "/proc/%s/ns/%s", pid, names[i]);
        nsfd[i] = open(path, O_RDONLY | O_CLOEXEC);
        if (nsfd[i] < 0) run_fallback_because("a namespace of the box cannot be opened");
        its[i] = ino_of_fd(nsfd[i]);
        if (its[i] != (ino_t)want[i]) run_fallback_because("a namespace that is not the box's");
        if (i >= 1 && i <= 3 && its[i] == own[i]) run_fallback_because("a namespace that is the caller's own");  /* mnt, pid, ipc: the box's own */
    }
    if (start_of(pid, now, sizeof now) != 0 || strcmp(now, start) != 0) run_fallback_because("the box's process is gone");  /* the same process all along */
    /* bwrap makes its mounts in one user namespace and runs the sandbox in a second inside it:
     * the first (the mounts' owner) is joined for the call's own mount and pid namespaces, the
     * second by the command's process. */
    int owner = ioctl(nsfd[1], NS_GET_USERNS);
    if (owner < 0) run_fallback_because("the owner of the box's mounts is unknown");
    ino_t owner_ino = ino_of_fd(owner);
    int cwd_fd = -1;
    if (cwd_file[0]) {  /* the CLI's cwd file: written through an fd, never through a link */
        cwd_fd = open(cwd_file, O_WRONLY | O_CREAT | O_APPEND | O_NOFOLLOW, 0600);
        char *at = NULL;
        for (char *p = strstr(command, " && pwd -P >| "); p; p = strstr(p + 1, " && pwd -P >| ")) at = p;
        if (cwd_fd < 0 || !at) run_fallback_because("the cwd file cannot be opened, or no frame");
        size_t head = (size_t)(at - command);
        char *rewritten = malloc(head + 64);
        if (!rewritten) run_fallback_because("out of memory");
        memcpy(rewritten, command, head);
        snprintf(rewritten + head, 64, " && pwd -P >| /dev/fd/%d", cwd_fd);
        command = rewritten;
    }
    char cwd[4096];
    if (!getcwd(cwd, sizeof cwd)) cwd[0] = 0;

    /* from here on, never the fallback: this process is no longer where bwrap would start */
    if (owner_ino != own[0] && setns(owner, CLONE_NEWUSER) != 0) fail("setns user");
    for (int i = 1; i < 5; i++) {
        if (i == 2) continue;  /* the box's pid namespace is the sleeper's: each call has its own */
        if (its[i] != own[i] && setns(nsfd[i], flags[i]) != 0) fail("setns");
    }
    if (!cwd[0] || chdir(cwd) != 0) {
        const char *home = getenv("HOME");
        if (!home || chdir(home) != 0) chdir("/");
    }
    if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0) fail("no_new_privs");
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (unshare(CLONE_NEWNS | CLONE_NEWPID) != 0) fail("unshare");
    if (mount(NULL, "/", NULL, MS_REC | MS_SLAVE, NULL) != 0) fail("mount /");
    /* bwrap's read-only binds over parts of /proc: off (a proc is mounted again only where the
     * old one is fully visible), on again over the call's own /proc below */
    static const char *ro[4] = {"/proc/sys", "/proc/sysrq-trigger", "/proc/irq", "/proc/bus"};
    for (int i = 0; i < 4; i++) umount2(ro[i], MNT_DETACH);
    pid_t child = fork();
    if (child < 0) fail("fork");
    if (child > 0) wait_and_exit(child);
    /* pid 1 of the call's own pid namespace: when it ends, every process the command left ends */
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (mount("proc", "/proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC, NULL) != 0) fail("mount /proc");
    for (int i = 0; i < 4; i++) {
        if (access(ro[i], F_OK) != 0) continue;
        if (mount(ro[i], ro[i], NULL, MS_BIND, NULL) != 0) fail("bind /proc");
        if (mount(NULL, ro[i], NULL, MS_BIND | MS_REMOUNT | MS_RDONLY | MS_NOSUID | MS_NODEV | MS_NOEXEC, NULL) != 0)
            fail("read-only /proc");
    }
    pid_t cmd = fork();
    if (cmd < 0) fail("fork");
    if (cmd > 0) {
        /* pid 1 keeps nothing of the outside open: the namespaces' fds, the cwd file */
        for (int i = 0; i < 5; i++) close(nsfd[i]);
        close(owner);
        if (cwd_fd >= 0) close(cwd_fd);
        int status;
        for (;;) {
            pid_t w = wait(&status);
            if (w == cmd) _exit(status_of(status));
            if (w < 0 && errno != EINTR) _exit(126);
        }
    }
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (its[0] != owner_ino && setns(nsfd[0], CLONE_NEWUSER) != 0) fail("setns user");
    for (int i = 0; i < 5; i++) close(nsfd[i]);
    close(owner);
    if (setsid() < 0) fail("setsid");
    for (int cap = 0; cap < 64; cap++)
        if (prctl(PR_CAPBSET_DROP, cap, 0, 0, 0) != 0) break;
    prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0);
    struct __user_cap_header_struct hdr = {_LINUX_CAPABILITY_VERSION_3, 0};
    struct __user_cap_data_struct data[2];
    memset(data, 0, sizeof data);
    if (syscall(SYS_capset, &hdr, data) != 0) fail("capset");
    /* the seccomp filter, from the fd 9 the fallback's bwrap would read */
    static unsigned char prog[4096];
    size_t got = 0;
    for (;;) {
        ssize_t r = read(9, prog + got, sizeof prog - got);
        if (r < 0 && errno == EINTR) continue;
        if (r <= 0) break;
        got += (size_t)r;
        if (got == sizeof prog) break;
    }
    close(9);
    if (got == 0 || got % sizeof(struct sock_filter) != 0) { errno = EINVAL; fail("the seccomp filter"); }
    struct sock_fprog fprog = {(unsigned short)(got / sizeof(struct sock_filter)), (struct sock_filter *)prog};
    if (syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER, 0, &fprog) != 0) fail("seccomp");
    setenv("TMPDIR", "/tmp", 1);
    char *shell = fallback[nfall - 3];
    char *args[] = {shell, fallback[nfall - 2], command, NULL};
    execv(shell, args);
    fail("exec");
    return 126;
}
