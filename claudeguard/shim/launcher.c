/* claudeguard's native launcher (Linux): the installed `claudeguard` when a C compiler was there
 * at install time (setup.py builds it; without one the Python launcher is installed instead).
 *
 * Why it exists: `claude --version`, `claude -v` (the Agent SDK's version probe) and `--help`
 * run through claudeguard on every alias user's machine, and a Python interpreter alone takes
 * longer to start here than the 15 ms the guard may add (bench/RESULTS.md). For exactly those
 * calls, with no config file anywhere, the guard has nothing to add: this program finds the
 * real CLI the way claudeguard/shim/discovery.py does and execs it. Everything else, and every
 * case it is not sure of, goes to the Python launcher installed beside it
 * (`claudeguard-python`), which decides and words every error; so this file never prints an
 * error of its own except when that launcher is missing.
 *
 * The rules it shares with the Python side (keep both in step; tests/test_launcher.py runs the
 * same cases through both and compares):
 *   - fast only for one argument among --version, -v, --help, -h;
 *   - not when CLAUDEGUARD_DISABLE is set (lockdown may refuse it), nor when the recursion token
 *     names our pid or our parent's (discovery.check_recursion words that error);
 *   - not when any config file exists: CLAUDEGUARD_CONFIG, the user file, or a project
 *     .claudeguard.toml from the cwd up to the repository root (config/find.py), since a
 *     file may set claude.path or lockdown;
 *   - the real CLI: CLAUDEGUARD_CLAUDE, else PATH minus every entry that is claudeguard (this
 *     binary by resolved path or by MARKER, or a small script that names claudeguard);
 *   - the child gets CLAUDEGUARD_EXEC_PID=<our pid>, the recursion token.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

extern char **environ;

/* discovery.is_claudeguard recognises a copy of this binary by this string. */
__attribute__((used)) static const char MARKER[] = "claudeguard-native-launcher";

#define RECURSION_VAR "CLAUDEGUARD_EXEC_PID"
#define HEAD_BYTES 4096
#define MAX_LAUNCHER_BYTES (1 << 20)

static char self_real[PATH_MAX];

static int env_set(const char *name) {
    const char *value = getenv(name);
    return value != NULL && value[0] != '\0';
}

static int is_regular(const char *path) {
    struct stat st;
    return stat(path, &st) == 0 && S_ISREG(st.st_mode);
}

static int exists(const char *path) {
    struct stat st;
    return stat(path, &st) == 0;
}

static int is_executable_file(const char *path) {
    return is_regular(path) && access(path, X_OK) == 0;
}

/* True when path is (a link to) claudeguard rather than the real CLI. */
static int is_claudeguard(const char *path) {
    char real[PATH_MAX];
    if (realpath(path, real) == NULL)
        return 0;
    if (strcmp(real, self_real) == 0)
        return 1;
    int fd = open(real, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return 0;
    char head[HEAD_BYTES];
    ssize_t n = read(fd, head, sizeof head);
    int found = 0;
    if (n >= 2 && head[0] == '#' && head[1] == '!') {
        found = memmem(head, (size_t)n, "claudeguard", 11) != NULL;
    } else if (n >= 4 && memcmp(head, "\177ELF", 4) == 0) {
        struct stat st;
        if (fstat(fd, &st) == 0 && st.st_size <= MAX_LAUNCHER_BYTES) {
            char *all = malloc((size_t)st.st_size + 1);
            ssize_t got = all ? pread(fd, all, (size_t)st.st_size, 0) : -1;
            found = got > 0 && memmem(all, (size_t)got, MARKER, sizeof MARKER - 1) != NULL;
            free(all);
        }
    }
    close(fd);
    return found;
}

static int join(char *out, const char *dir, const char *name) {
    int n = snprintf(out, PATH_MAX, "%s/%s", dir, name);
    return n > 0 && n < PATH_MAX;
}

/* Is there any config file to read? -1 when that cannot be told cheaply (leave it to Python). */
static int any_config(void) {
    char path[PATH_MAX];
    if (env_set("CLAUDEGUARD_CONFIG"))
        return 1;
    if (env_set("XDG_CONFIG_HOME")) {
        if (!join(path, getenv("XDG_CONFIG_HOME"), "claudeguard/config.toml"))
            return -1;
    } else if (env_set("HOME")) {
        if (!join(path, getenv("HOME"), ".config/claudeguard/config.toml"))
            return -1;
    } else {
        return -1;
    }
    if (exists(path))
        return 1;
    char dir[PATH_MAX];
    if (getcwd(dir, sizeof dir) == NULL)
        return -1;
    for (;;) {
        if (!join(path, dir, ".claudeguard.toml"))
            return -1;
        if (is_regular(path))
            return 1;
        if (!join(path, dir, ".git"))
            return -1;
        if (exists(path))
            return 0;
        char *slash = strrchr(dir, '/');
        if (slash == NULL || (slash == dir && dir[1] == '\0'))
            return 0;
        if (slash == dir)
            dir[1] = '\0';
        else
            *slash = '\0';
    }
}

/* Does the recursion token name us or our parent? */
static int recursion(void) {
    const char *token = getenv(RECURSION_VAR);
    if (token == NULL || token[0] == '\0')
        return 0;
    char *end;
    errno = 0;
    long pid = strtol(token, &end, 10);
    if (errno != 0 || *end != '\0')
        return 0; /* not a pid: the Python side ignores it too */
    return pid == (long)getpid() || pid == (long)getppid();
}

static int find_claude(char *out) {
    const char *configured = getenv("CLAUDEGUARD_CLAUDE");
    if (configured != NULL && configured[0] != '\0') {
        if (configured[0] == '~' || strlen(configured) >= PATH_MAX)
            return 0;
        if (!is_executable_file(configured) || is_claudeguard(configured))
            return 0; /* an error to word: Python's */
        strcpy(out, configured);
        return 1;
    }
    const char *path = getenv("PATH");
    if (path == NULL)
        return 0;
    for (const char *start = path;; ) {
        const char *end = strchr(start, ':');
        size_t len = end ? (size_t)(end - start) : strlen(start);
        char dir[PATH_MAX];
        if (len >= sizeof dir)
            return 0;
        if (len == 0) {
            strcpy(dir, ".");
        } else {
            memcpy(dir, start, len);
            dir[len] = '\0';
        }
        if (join(out, dir, "claude") && is_executable_file(out) && !is_claudeguard(out))
            return 1;
        if (end == NULL)
            return 0;
        start = end + 1;
    }
}

static void exec_real(const char *real, char **argv) {
    size_t count = 0;
    while (environ[count] != NULL)
        count++;
    char **env = malloc((count + 2) * sizeof *env);
    if (env == NULL)
        return;
    size_t n = 0;
    for (size_t i = 0; i < count; i++)
        if (strncmp(environ[i], RECURSION_VAR "=", sizeof RECURSION_VAR) != 0)
            env[n++] = environ[i];
    char token[64];
    snprintf(token, sizeof token, RECURSION_VAR "=%ld", (long)getpid());
    env[n++] = token;
    env[n] = NULL;
    argv[0] = (char *)real;
    execve(real, argv, env);
    free(env); /* failed: Python tries again and words the error */
}

static int fast_call(int argc, char **argv) {
    if (argc != 2)
        return 0;
    const char *arg = argv[1];
    return strcmp(arg, "--version") == 0 || strcmp(arg, "-v") == 0 || strcmp(arg, "--help") == 0 ||
           strcmp(arg, "-h") == 0;
}

#ifndef SELF_EXE
#define SELF_EXE "/proc/self/exe" /* tests build with another path to stand for a missing /proc */
#endif

/* Our own resolved path: /proc/self/exe, else (no /proc in a chroot or a small container) how
 * the shell found argv[0]. */
static int find_self(const char *argv0) {
    if (realpath(SELF_EXE, self_real) != NULL)
        return 1;
    if (strchr(argv0, '/') != NULL)
        return realpath(argv0, self_real) != NULL;
    const char *path = getenv("PATH");
    for (const char *start = path; start != NULL; ) {
        const char *end = strchr(start, ':');
        size_t len = end ? (size_t)(end - start) : strlen(start);
        char candidate[PATH_MAX];
        int n = snprintf(candidate, sizeof candidate, "%.*s/%s", (int)(len ? len : 1), len ? start : ".", argv0);
        if (n > 0 && n < PATH_MAX && is_executable_file(candidate) && realpath(candidate, self_real) != NULL)
            return 1;
        start = end ? end + 1 : NULL;
    }
    return 0;
}

int main(int argc, char **argv) {
    if (argc < 1 || !find_self(argv[0])) {
        fprintf(stderr, "claudeguard: cannot find its own path (no /proc/self/exe, argv[0] %s)\n", argc ? argv[0] : "missing");
        return 2;
    }
    if (fast_call(argc, argv)) {
        const char *disable = getenv("CLAUDEGUARD_DISABLE");
        int disabled = disable != NULL && disable[0] != '\0' && strcmp(disable, "0") != 0;
        char real[PATH_MAX];
        if (!disabled && !recursion() && any_config() == 0 && find_claude(real))
            exec_real(real, argv);
    }
    char python_launcher[PATH_MAX];
    *strrchr(self_real, '/') = '\0';
    if (!join(python_launcher, self_real, "claudeguard-python")) {
        fprintf(stderr, "claudeguard: path too long: %s\n", self_real);
        return 2;
    }
    argv[0] = python_launcher;
    execv(python_launcher, argv);
    fprintf(stderr, "claudeguard: cannot run %s: %s (reinstall claudeguard)\n", python_launcher, strerror(errno));
    return 2;
}
