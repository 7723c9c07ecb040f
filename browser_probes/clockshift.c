/* clockshift: move a browser's wall clock, and nothing else (issue 27).
 *
 * LD_PRELOADed into the browser (all its processes inherit the environment). At load time
 * it maps NETSURVEY_CLOCK_FILE (one page; bytes 0-7 = the offset in nanoseconds, int64,
 * host byte order) read-only and shared, so a writer (browser_probes.drivers.set_clock_offset,
 * pwrite in place) moves the clock of every process at once, without a syscall per call and
 * also inside sandboxed processes (mapped before their sandbox starts).
 *
 * Shifted: CLOCK_REALTIME, CLOCK_REALTIME_COARSE and CLOCK_TAI (clock_gettime, clock_getres
 * untouched), gettimeofday, time, timespec_get. Monotonic and CPU clocks stay real, unless
 * NETSURVEY_CLOCK_MONOTONIC=1: then CLOCK_MONOTONIC(_RAW, _COARSE) and CLOCK_BOOTTIME jump by
 * the same offset (as if the machine had been running, idle, for that long): glib-networking
 * expires its TLS session cache by g_get_monotonic_time (WebKit).
 * Absolute REALTIME deadlines handed back to the kernel are shifted back: pthread_cond_timedwait
 * / pthread_cond_clockwait on a condition variable using CLOCK_REALTIME (NSPR's PR_WaitCondVar
 * computes its deadline from gettimeofday: a deadline days ahead would never expire),
 * sem_timedwait, pthread_mutex_timedlock, clock_nanosleep(CLOCK_REALTIME, TIMER_ABSTIME).
 *
 * Why not libfaketime 0.9.10: Firefox ESR 153 hangs at start under it (even --version), and
 * Chromium 156 starts only with its monotonic clock faked too (field notes; README).
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <semaphore.h>
#include <stdint.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

static const volatile int64_t *off_ns;
static int shift_mono;

typedef int (*cg_t)(clockid_t, struct timespec *);
typedef int (*cw_t)(pthread_cond_t *, pthread_mutex_t *, const struct timespec *);
typedef int (*ccw_t)(pthread_cond_t *, pthread_mutex_t *, clockid_t, const struct timespec *);
typedef int (*sw_t)(sem_t *, const struct timespec *);
typedef int (*ml_t)(pthread_mutex_t *, const struct timespec *);
typedef int (*cn_t)(clockid_t, int, const struct timespec *, struct timespec *);
static cg_t real_cg;
static cw_t real_cw;
static ccw_t real_ccw;
static sw_t real_sw;
static ml_t real_ml;
static cn_t real_cn;

__attribute__((constructor)) static void clockshift_init(void) {
    real_cg = (cg_t)dlsym(RTLD_NEXT, "clock_gettime");
    real_cw = (cw_t)dlvsym(RTLD_NEXT, "pthread_cond_timedwait", "GLIBC_2.3.2");
    if (!real_cw) real_cw = (cw_t)dlsym(RTLD_NEXT, "pthread_cond_timedwait");
    real_ccw = (ccw_t)dlsym(RTLD_NEXT, "pthread_cond_clockwait");
    real_sw = (sw_t)dlsym(RTLD_NEXT, "sem_timedwait");
    real_ml = (ml_t)dlsym(RTLD_NEXT, "pthread_mutex_timedlock");
    real_cn = (cn_t)dlsym(RTLD_NEXT, "clock_nanosleep");
    const char *mo = getenv("NETSURVEY_CLOCK_MONOTONIC");
    shift_mono = mo && mo[0] == '1';
    const char *p = getenv("NETSURVEY_CLOCK_FILE");
    if (!p) return;
    int fd = open(p, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return;
    void *m = mmap(NULL, 4096, PROT_READ, MAP_SHARED, fd, 0);
    close(fd);
    if (m != MAP_FAILED) off_ns = (const volatile int64_t *)m;
}

static int64_t offset(void) {
    if (!off_ns) return 0;
    int64_t a, b;
    do { a = *off_ns; b = *off_ns; } while (a != b);   /* no torn read of an 8-byte store */
    return a;
}

static int raw_cg(clockid_t c, struct timespec *ts) {
    if (real_cg) return real_cg(c, ts);
    return (int)syscall(SYS_clock_gettime, c, ts);
}

static void add_ns(struct timespec *ts, int64_t d) {
    int64_t ns = (int64_t)ts->tv_nsec + d % 1000000000LL;
    ts->tv_sec += d / 1000000000LL;
    if (ns < 0) { ns += 1000000000LL; ts->tv_sec -= 1; }
    if (ns >= 1000000000LL) { ns -= 1000000000LL; ts->tv_sec += 1; }
    ts->tv_nsec = ns;
}

static int is_wall(clockid_t c) {
    return c == CLOCK_REALTIME || c == CLOCK_REALTIME_COARSE || c == CLOCK_TAI;
}

static int is_mono(clockid_t c) {
    return c == CLOCK_MONOTONIC || c == CLOCK_MONOTONIC_RAW || c == CLOCK_MONOTONIC_COARSE ||
           c == CLOCK_BOOTTIME;
}

static int is_shifted(clockid_t c) { return is_wall(c) || (shift_mono && is_mono(c)); }

int clock_gettime(clockid_t c, struct timespec *ts) {
    int r = raw_cg(c, ts);
    if (r == 0 && is_shifted(c)) add_ns(ts, offset());
    return r;
}

int gettimeofday(struct timeval *restrict tv, void *restrict tz) {
    struct timespec ts;
    if (tz) { struct timezone *z = tz; z->tz_minuteswest = 0; z->tz_dsttime = 0; }
    void *tvp = tv;
    if (!tvp) return 0;
    if (clock_gettime(CLOCK_REALTIME, &ts) != 0) return -1;
    tv->tv_sec = ts.tv_sec;
    tv->tv_usec = ts.tv_nsec / 1000;
    return 0;
}

time_t time(time_t *t) {
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    if (t) *t = ts.tv_sec;
    return ts.tv_sec;
}

int timespec_get(struct timespec *ts, int base) {
    if (base != TIME_UTC) return 0;
    return clock_gettime(CLOCK_REALTIME, ts) == 0 ? base : 0;
}

/* a REALTIME absolute deadline computed from the shifted clock, back in real time */
static const struct timespec *unshift(const struct timespec *abs, struct timespec *buf) {
    int64_t d = offset();
    if (!abs || d == 0) return abs;
    *buf = *abs;
    add_ns(buf, -d);
    return buf;
}

/* glibc (nptl, 2.25+): bit 1 of __wrefs = the condition variable's clock (0 = REALTIME) */
static int cond_is_realtime(pthread_cond_t *c) { return (c->__data.__wrefs & 2) == 0; }

int pthread_cond_timedwait(pthread_cond_t *c, pthread_mutex_t *m, const struct timespec *abs) {
    struct timespec b;
    if (!real_cw) return ENOSYS;
    return real_cw(c, m, (cond_is_realtime(c) || shift_mono) ? unshift(abs, &b) : abs);
}

int pthread_cond_clockwait(pthread_cond_t *c, pthread_mutex_t *m, clockid_t clk, const struct timespec *abs) {
    struct timespec b;
    if (!real_ccw) return ENOSYS;
    return real_ccw(c, m, clk, is_shifted(clk) ? unshift(abs, &b) : abs);
}

int sem_timedwait(sem_t *s, const struct timespec *abs) {
    struct timespec b;
    if (!real_sw) { errno = ENOSYS; return -1; }
    return real_sw(s, unshift(abs, &b));
}

int pthread_mutex_timedlock(pthread_mutex_t *m, const struct timespec *abs) {
    struct timespec b;
    if (!real_ml) return ENOSYS;
    return real_ml(m, unshift(abs, &b));
}

int clock_nanosleep(clockid_t c, int flags, const struct timespec *req, struct timespec *rem) {
    struct timespec b;
    if (!real_cn) return ENOSYS;
    if ((flags & TIMER_ABSTIME) && is_shifted(c)) req = unshift(req, &b);
    return real_cn(c, flags, req, rem);
}
