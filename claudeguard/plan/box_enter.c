/* claudeguard: runs one Bash call in the session's box (claudeguard/plan/box_enter.py;
 * docs/design.md, "The session's box"). Built once per machine from this file by the guard.
 * Two ways in:
 *
 *   box-enter LIVE_FILE CWD_FILE BG_DIR COMMAND -- FALLBACK...
 *
 * The box script's (plan/sandbox.py). LIVE_FILE: "pid start user mnt pid ipc net bgdir", the
 * session's box as the launcher started it (the pid of its first process, that process's start
 * time, its namespaces' inodes, the dir of background output it shows). CWD_FILE: where the CLI
 * wants the command's last directory (or ""). BG_DIR: the background output dir the call's own
 * box would show (or ""). FALLBACK: the call's own box (the box script's bwrap argv, ending in
 * SHELL -c COMMAND), run whenever the session's box is not exactly as the launcher left it:
 * never no box. The seccomp filter is read from fd 9, as the fallback's bwrap reads it.
 *
 *   <session dir>/bash -c "<session dir>/box '<command>'"
 *
 * The CLI's shell (CLAUDE_CODE_SHELL: a link to this program named as the real shell, bash or
 * zsh), which the CLI hands its prefix and the call. The common case, a Bash call of a box that
 * is live, is run here as the box script would run it (its checks, the entry, the checks after
 * the command: box-shell.conf in the link's dir says what they are), without the box script's
 * shell and the CLI's shell before it (~2.5 ms a call). Everything else (any other use of the
 * shell, a call quoted in another way, a cwd file or background dir the script would not take
 * as it is, a call let out of the box, a box that is not live) goes to the real shell with the
 * same arguments, that is to the box script, as without this program. */
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

/* what runs when the session's box is not entered: the call's own bwrap box (the script's way
 * in), or the real shell with the CLI's own arguments (the shell's way in) */
static char **fallback;
static int shell_way;

static void not_entered(const char *why) {
    if (getenv("CLAUDEGUARD_BOX_ENTER_SAY"))
        fprintf(stderr, "claudeguard: %s: %s\n", shell_way ? "the box script" : "a box of the call's own", why);
    execv(fallback[0], fallback);
    fprintf(stderr, "claudeguard: cannot start %s (%s): %s\n", shell_way ? "the shell" : "the box", fallback[0],
            strerror(errno));
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

/* --- the session's box, as `live` describes it ---------------------------------------------- */

static const char *names[5] = {"user", "mnt", "pid", "ipc", "net"};
static const int flags[5] = {CLONE_NEWUSER, CLONE_NEWNS, CLONE_NEWPID, CLONE_NEWIPC, CLONE_NEWNET};

struct box {
    int nsfd[5];
    ino_t its[5], own[5]; /* our own, read before any setns: /proc/self is another's after it */
    int owner;            /* the user namespace that owns the box's mounts */
    ino_t owner_ino;
};

/* NULL when `live` names the box exactly as the launcher left it (its namespaces opened into
 * `b`), else why not (nothing left open) */
static const char *find_box(const char *live, const char *bg, struct box *b) {
    char path[4096], line[1024];
    int fd = open(live, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0) return "no live file";
    ssize_t n = read(fd, line, sizeof line - 1);
    close(fd);
    if (n <= 0) return "an empty live file";
    line[n] = 0;
    char pid[32], start[32], livebg[2048], now[32];
    unsigned long long want[5];
    if (sscanf(line, "%31[0-9] %31[0-9] %llu %llu %llu %llu %llu %2047s", pid, start, &want[0], &want[1],
               &want[2], &want[3], &want[4], livebg) != 8)
        return "a live file not as written";
    if (bg[0] && strcmp(bg, livebg) != 0) return "another background output dir";
    if (start_of(pid, now, sizeof now) != 0 || strcmp(now, start) != 0) return "the box's process is gone";
    const char *why = NULL;
    int opened = 0;
    for (int i = 0; i < 5 && !why; i++) {
        b->own[i] = own_ino(names[i]);
        snprintf(path, sizeof path, "/proc/%s/ns/%s", pid, names[i]);
        b->nsfd[i] = open(path, O_RDONLY | O_CLOEXEC);
        if (b->nsfd[i] < 0) {
            why = "a namespace of the box cannot be opened";
            break;
        }
        opened = i + 1;
        b->its[i] = ino_of_fd(b->nsfd[i]);
        if (b->its[i] != (ino_t)want[i]) why = "a namespace that is not the box's";
        else if (i >= 1 && i <= 3 && b->its[i] == b->own[i]) why = "a namespace that is the caller's own"; /* mnt, pid, ipc */
    }
    /* the same process all along */
    if (!why && (start_of(pid, now, sizeof now) != 0 || strcmp(now, start) != 0)) why = "the box's process is gone";
    /* bwrap makes its mounts in one user namespace and runs the sandbox in a second inside it:
     * the first (the mounts' owner) is joined for the call's own mount and pid namespaces, the
     * second by the command's process. */
    if (!why) {
        b->owner = ioctl(b->nsfd[1], NS_GET_USERNS);
        if (b->owner < 0) why = "the owner of the box's mounts is unknown";
        else b->owner_ino = ino_of_fd(b->owner);
    }
    if (why)
        for (int i = 0; i < opened; i++) close(b->nsfd[i]);
    return why;
}

/* The CLI's cwd file, opened to be written through /dev/fd/N (never through a link), and the
 * command's frame pointed at it: the fd, or -1 (the command untouched) */
static int open_cwd_file(const char *cwd_file, const char *frame, char **command) {
    int fd = open(cwd_file, O_WRONLY | O_CREAT | O_APPEND | O_NOFOLLOW, 0600);
    char *at = NULL;
    for (char *p = strstr(*command, frame); p; p = strstr(p + 1, frame)) at = p;
    struct stat st;
    if (fd < 0 || !at || fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
        if (fd >= 0) close(fd);
        return -1;
    }
    size_t head = (size_t)(at - *command);
    char *rewritten = malloc(head + strlen(frame) + 32);
    if (!rewritten) {
        close(fd);
        return -1;
    }
    memcpy(rewritten, *command, head);
    snprintf(rewritten + head, strlen(frame) + 32, "%s/dev/fd/%d", frame, fd);
    *command = rewritten;
    return fd;
}

/* Into the box: never returns. From here on, never the fallback: this process is no longer
 * where bwrap (or the box script) would start. The seccomp filter is read from fd 9. */
static void run_in(struct box *b, char *command, const char *shell, int cwd_fd) {
    char cwd[4096];
    if (!getcwd(cwd, sizeof cwd)) cwd[0] = 0;
    if (b->owner_ino != b->own[0] && setns(b->owner, CLONE_NEWUSER) != 0) fail("setns user");
    for (int i = 1; i < 5; i++) {
        if (i == 2) continue; /* the box's pid namespace is the sleeper's: each call has its own */
        if (b->its[i] != b->own[i] && setns(b->nsfd[i], flags[i]) != 0) fail("setns");
    }
    if (!cwd[0] || chdir(cwd) != 0) {
        const char *home = getenv("HOME");
        if (!home || chdir(home) != 0) chdir("/");
    }
    if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0) fail("no_new_privs");
    prctl(PR_SET_PDEATHSIG, SIGKILL); /* again: joining a user namespace cleared it */
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
        for (int i = 0; i < 5; i++) close(b->nsfd[i]);
        close(b->owner);
        if (cwd_fd >= 0) close(cwd_fd);
        int status;
        for (;;) {
            pid_t w = wait(&status);
            if (w == cmd) _exit(status_of(status));
            if (w < 0 && errno != EINTR) _exit(126);
        }
    }
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (b->its[0] != b->owner_ino && setns(b->nsfd[0], CLONE_NEWUSER) != 0) fail("setns user");
    for (int i = 0; i < 5; i++) close(b->nsfd[i]);
    close(b->owner);
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
    if (got == 0 || got % sizeof(struct sock_filter) != 0) {
        errno = EINVAL;
        fail("the seccomp filter");
    }
    struct sock_fprog fprog = {(unsigned short)(got / sizeof(struct sock_filter)), (struct sock_filter *)prog};
    if (syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER, 0, &fprog) != 0) fail("seccomp");
    setenv("TMPDIR", "/tmp", 1);
    char *args[] = {(char *)shell, "-c", command, NULL};
    execv(shell, args);
    fail("exec");
}

/* --- the box script's way in ------------------------------------------------------------------ */

static int script_way(int argc, char **argv) {
    if (argc < 7 || strcmp(argv[5], "--") != 0) {
        fprintf(stderr, "claudeguard: the box's entry was called wrongly\n");
        return 126;
    }
    const char *live = argv[1], *cwd_file = argv[2], *bg = argv[3];
    char *command = argv[4];
    fallback = argv + 6;
    int nfall = argc - 6;
    if (nfall < 3) not_entered("no shell in the fallback");
    struct box b;
    const char *why = find_box(live, bg, &b);
    if (why) not_entered(why);
    int cwd_fd = -1;
    if (cwd_file[0]) { /* the CLI's cwd file: written through an fd, never through a link */
        cwd_fd = open_cwd_file(cwd_file, " && pwd -P >| ", &command);
        if (cwd_fd < 0) not_entered("the cwd file cannot be opened, or no frame");
    }
    run_in(&b, command, fallback[nfall - 3], cwd_fd);
    return 126;
}

/* --- the CLI's shell's way in ----------------------------------------------------------------- */

#define MAX_LIST 256
static struct {
    const char *prefix, *shell, *live, *seccomp, *boxes, *after, *frame, *unbox, *index, *held;
    const char *hidden[MAX_LIST], *secret[MAX_LIST], *gone[MAX_LIST];
    int nhidden, nsecret, ngone;
} conf;

/* box-shell.conf: "key value" lines (plan/sandbox.py writes it; no value holds a newline) */
static int read_conf(const char *path) {
    static char text[65536];
    int fd = open(path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0) return -1;
    size_t got = 0;
    for (;;) {
        ssize_t r = read(fd, text + got, sizeof text - 1 - got);
        if (r < 0 && errno == EINTR) continue;
        if (r <= 0) break;
        got += (size_t)r;
    }
    close(fd);
    if (got == 0 || got == sizeof text - 1 || text[got - 1] != '\n') return -1;
    text[got] = 0;
    for (char *line = text; *line;) {
        char *end = strchr(line, '\n');
        *end = 0;
        char *value = strchr(line, ' ');
        if (!value) return -1;
        *value++ = 0;
        const char **one = NULL;
        if (!strcmp(line, "prefix")) one = &conf.prefix;
        else if (!strcmp(line, "shell")) one = &conf.shell;
        else if (!strcmp(line, "live")) one = &conf.live;
        else if (!strcmp(line, "seccomp")) one = &conf.seccomp;
        else if (!strcmp(line, "boxes")) one = &conf.boxes;
        else if (!strcmp(line, "after")) one = &conf.after;
        else if (!strcmp(line, "frame")) one = &conf.frame;
        else if (!strcmp(line, "unbox")) one = &conf.unbox;
        else if (!strcmp(line, "index")) one = &conf.index;
        else if (!strcmp(line, "held")) one = &conf.held;
        /* a list longer than this takes no call (plan/sandbox.py writes none) */
        if (one) *one = value;
        else if (!strcmp(line, "hidden") && conf.nhidden < MAX_LIST) conf.hidden[conf.nhidden++] = value;
        else if (!strcmp(line, "secret") && conf.nsecret < MAX_LIST) conf.secret[conf.nsecret++] = value;
        else if (!strcmp(line, "gone") && conf.ngone < MAX_LIST) conf.gone[conf.ngone++] = value;
        else return -1;
        line = end + 1;
    }
    return conf.prefix && conf.shell && conf.live && conf.seccomp && conf.boxes && conf.after && conf.frame &&
           conf.unbox && conf.shell[0] == '/' ? 0 : -1;
}

/* The command as bash reads the CLI's quoting of it ('...' pieces, a quote inside as '"'"'),
 * the whole rest of the string; NULL for anything else */
static char *unquote(const char *s) {
    char *out = malloc(strlen(s) + 1);
    size_t o = 0;
    if (!out) return NULL;
    while (*s) {
        if (*s == '\'') {
            for (s++; *s && *s != '\''; s++) out[o++] = *s;
            if (*s != '\'') return NULL;
            s++;
        } else if (s[0] == '"' && s[1] == '\'' && s[2] == '"') {
            out[o++] = '\'';
            s += 3;
        } else {
            return NULL;
        }
    }
    out[o] = 0;
    return out;
}

/* under one of the dirs the box hides (the box script's case patterns DIR/...) */
static int hidden(const char *path) {
    for (int i = 0; i < conf.nhidden; i++) {
        size_t n = strlen(conf.hidden[i]);
        if (strncmp(path, conf.hidden[i], n) == 0 && path[n] == '/') return 1;
    }
    return 0;
}

/* the cwd file as the box script takes it: an absolute "...-cwd" of plain characters, no "/../",
 * not in a hidden dir, not a link, a regular file or none yet */
static int plain_cwd_file(const char *f) {
    size_t n = strlen(f);
    if (n < 5 || f[0] != '/' || strcmp(f + n - 4, "-cwd") != 0 || strstr(f, "/../") || hidden(f)) return 0;
    for (const char *p = f; *p; p++)
        if (!(*p >= 'A' && *p <= 'Z') && !(*p >= 'a' && *p <= 'z') && !(*p >= '0' && *p <= '9') && !strchr("_./-", *p))
            return 0;
    struct stat st;
    return lstat(f, &st) != 0 ? errno == ENOENT : S_ISREG(st.st_mode);
}

/* Once the command's box has ended: does one of the box script's checks after a command
 * have anything to look at? (A file git would run code from, made by the command; the git
 * index changed since the call began, or a nested repository held aside before.) */
static int after_has_work(const char *started) {
    struct stat st, since;
    for (int i = 0; i < conf.ngone; i++)
        if (lstat(conf.gone[i], &st) == 0) return 1;
    if (conf.index && stat(conf.index, &st) == 0) {
        if (stat(started, &since) != 0) return 1;
        if (st.st_mtim.tv_sec > since.st_mtim.tv_sec ||
            (st.st_mtim.tv_sec == since.st_mtim.tv_sec && st.st_mtim.tv_nsec >= since.st_mtim.tv_nsec))
            return 1; /* the script's -nt, counting a tie as newer */
    }
    return conf.held && stat(conf.held, &st) == 0 && st.st_size > 0;
}

static int shell_way_in(int argc, char **argv) {
    char path[4096];
    const char *slash = strrchr(argv[0], '/');
    if (argv[0][0] != '/' || !slash || (size_t)(slash - argv[0]) > sizeof path - 32) {
        fprintf(stderr, "claudeguard: the box's shell was started without its path\n");
        return 126;
    }
    snprintf(path, sizeof path, "%.*s/box-shell.conf", (int)(slash - argv[0]), argv[0]);
    if (read_conf(path) != 0) {
        fprintf(stderr, "claudeguard: the box's shell cannot read %s\n", path);
        return 126; /* never a shell outside the box in its place */
    }
    shell_way = 1;
    argv[0] = (char *)conf.shell;
    fallback = argv;
    if (argc != 3 || strcmp(argv[1], "-c") != 0) not_entered("not a call of the prefix");
    size_t plen = strlen(conf.prefix);
    const char *s = argv[2];
    if (strncmp(s, conf.prefix, plen) != 0 || s[plen] != ' ' || s[plen + 1] != '\'') not_entered("not the box script's call");
    char *command = unquote(s + plen + 1);
    if (!command) not_entered("a call quoted in another way");
    const char *text = getenv("__CLAUDE_CC_COMMAND_TEXT");
    if (strstr(command, conf.unbox) || (text && strstr(text, conf.unbox))) not_entered("a call let out of the box");
    char *at = NULL;
    for (char *p = strstr(command, conf.frame); p; p = strstr(p + 1, conf.frame)) at = p;
    if (!at) not_entered("not a Bash call");
    char *f = strdup(at + strlen(conf.frame));
    size_t fn = f ? strlen(f) : 0;
    if (fn >= 2 && f[0] == '\'' && f[fn - 1] == '\'') {
        f[fn - 1] = 0;
        f++;
    }
    if (!f || !plain_cwd_file(f)) not_entered("a cwd file the script would look at");
    /* the background output dir, as the box script finds it */
    char bg[4096] = "";
    const char *base = getenv("CLAUDE_CODE_TMPDIR");
    if (!base || !base[0]) base = getenv("TMPDIR");
    if (!base || !base[0]) base = "/tmp";
    snprintf(path, sizeof path, "%s/claude-%u", base, (unsigned)getuid());
    struct stat st;
    if (!hidden(path) && !strstr(path, "/../") && strncmp(path, "/tmp/", 5) == 0 && lstat(path, &st) == 0 &&
        S_ISDIR(st.st_mode))
        snprintf(bg, sizeof bg, "%s", path);
    struct box b;
    const char *why = find_box(conf.live, bg, &b);
    if (why) not_entered(why);
    /* the seccomp filter on fd 9, where the box reads it (the box script's `9< FILE`), before the
     * cwd file takes the lowest free fd */
    int sec = open(conf.seccomp, O_RDONLY | O_CLOEXEC);
    if (sec < 0 || (sec != 9 && dup2(sec, 9) != 9)) not_entered("no seccomp filter");
    if (sec != 9) close(sec);
    int cwd_fd = open_cwd_file(f, conf.frame, &command);
    if (cwd_fd < 0) not_entered("the cwd file cannot be opened");
    /* As the box script: named for the hold (gate/freeze.py), its pid in boxes/ before the box
     * runs, the guard's secrets out of the environment. */
    prctl(PR_SET_NAME, "box-enter");
    char started[4096];
    snprintf(started, sizeof started, "%s/%d", conf.boxes, (int)getpid());
    int mark = open(started, O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC, 0600);
    if (mark >= 0) close(mark);
    for (int i = 0; i < conf.nsecret; i++) unsetenv(conf.secret[i]);
    pid_t parent = getpid();
    pid_t child = fork();
    if (child < 0) not_entered("fork");
    if (child == 0) {
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        if (getppid() != parent) _exit(126);
        run_in(&b, command, conf.shell, cwd_fd);
    }
    for (int i = 0; i < 5; i++) close(b.nsfd[i]);
    close(b.owner);
    close(cwd_fd);
    close(9);
    int status, code;
    while (waitpid(child, &status, 0) < 0)
        if (errno != EINTR) _exit(126);
    code = status_of(status);
    if (after_has_work(started)) {
        char said[16];
        snprintf(said, sizeof said, "%d", code);
        execl("/bin/sh", "sh", conf.after, said, (char *)NULL);
        fprintf(stderr, "claudeguard: the checks after the command did not run (%s): %s\n", conf.after, strerror(errno));
        _exit(126);
    }
    _exit(code);
}

int main(int argc, char **argv) {
    const char *name = argc > 0 ? strrchr(argv[0], '/') : NULL;
    name = name ? name + 1 : (argc > 0 ? argv[0] : "");
    if (!strcmp(name, "bash") || !strcmp(name, "zsh")) return shell_way_in(argc, argv);
    return script_way(argc, argv);
}
