/* connectgate: every IP connection a process tree opens is asked for first (issue 24).
 *
 * LD_PRELOADed into testssl.sh; every process it starts (bash subshells, openssl s_client,
 * timeout, ...) inherits LD_PRELOAD and NETSURVEY_GATE_SOCKET, so their sockets are gated
 * too: testssl.sh opens most of its connections itself (bash's /dev/tcp) or through
 * s_client, neither of which an openssl wrapper script could pace.
 *
 * Before connect() on an AF_INET/AF_INET6 socket, and before sendto()/sendmsg()/sendmmsg()
 * with a destination address on one (UDP datagrams, TCP Fast Open), the process connects to the
 * unix socket NETSURVEY_GATE_SOCKET (a fresh connection per request: several processes ask
 * at once), writes one line
 *
 *     connect tcp|udp ADDRESS PORT\n
 *
 * and waits for one line back: "ok" (the netsurvey parent checked the destination and the
 * policy and took a token of the run's rate limiter) or anything else / EOF / no parent:
 * refused, the call fails with ECONNREFUSED (connect) or EACCES (sendto/sendmsg) and no
 * packet leaves. The decision is the parent's alone (testssl.py): the shim asks for every IP
 * destination, so a connection to anything else (a resolver, another port, another loopback
 * address) is refused and shows in the parent's count of refusals.
 *
 * A TCP socket already connected is not asked again (a second connect() only says EISCONN).
 * A second connect() on a non-blocking socket whose first one said EINPROGRESS would be asked
 * again (the parent would count one connection too many; bash and s_client connect blocking).
 * connect(AF_UNSPEC) (dissolving a UDP association) and unix sockets are never gated.
 * Name resolution: getaddrinfo/gethostbyname(_r|2) of anything but an address literal fail
 * (EAI_NONAME / HOST_NOT_FOUND): testssl.sh is given the address (--ip, --nodns none), so a
 * lookup would be a query leaving unpaced, and through nscd/systemd-resolved (unix sockets)
 * the shim would not see it.
 *
 * Not covered: statically linked programs and direct syscalls (testssl.sh 3.0.8 runs
 * neither for its connections; the test counts every SYN with a sniffer to show it).
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <dlfcn.h>
#include <errno.h>
#include <netdb.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

typedef int (*connect_t)(int, const struct sockaddr *, socklen_t);
typedef ssize_t (*sendto_t)(int, const void *, size_t, int, const struct sockaddr *, socklen_t);
typedef ssize_t (*sendmsg_t)(int, const struct msghdr *, int);
typedef int (*sendmmsg_t)(int, struct mmsghdr *, unsigned int, int);
typedef int (*gai_t)(const char *, const char *, const struct addrinfo *, struct addrinfo **);
typedef struct hostent *(*ghbn_t)(const char *);
typedef struct hostent *(*ghbn2_t)(const char *, int);
typedef int (*ghbnr_t)(const char *, struct hostent *, char *, size_t, struct hostent **, int *);

static void *next(const char *name) { return dlsym(RTLD_NEXT, name); }

/* Whether the parent grants a connection of socket type `type` to `sa`: 1 yes, 0 no. */
static int ask(const struct sockaddr *sa, int type) {
    char host[INET6_ADDRSTRLEN], line[128], answer[8];
    int port;
    if (sa->sa_family == AF_INET) {
        const struct sockaddr_in *in = (const void *)sa;
        inet_ntop(AF_INET, &in->sin_addr, host, sizeof host);
        port = ntohs(in->sin_port);
    } else {
        const struct sockaddr_in6 *in6 = (const void *)sa;
        inet_ntop(AF_INET6, &in6->sin6_addr, host, sizeof host);
        port = ntohs(in6->sin6_port);
    }
    const char *path = getenv("NETSURVEY_GATE_SOCKET");
    struct sockaddr_un un = {.sun_family = AF_UNIX};
    if (!path || strlen(path) >= sizeof un.sun_path)
        return 0;
    strcpy(un.sun_path, path);
    int saved = errno, ok = 0;
    int s = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (s >= 0 && ((connect_t)next("connect"))(s, (struct sockaddr *)&un, sizeof un) == 0) {
        int n = snprintf(line, sizeof line, "connect %s %s %d\n", type == SOCK_STREAM ? "tcp" : "udp", host, port);
        if (write(s, line, n) == n) {
            size_t got = 0;
            ssize_t r;
            while (got < sizeof answer - 1 && (r = read(s, answer + got, sizeof answer - 1 - got)) > 0) {
                got += r;
                if (memchr(answer, '\n', got))
                    break;
            }
            answer[got] = 0;
            ok = strcmp(answer, "ok\n") == 0;
        }
    }
    if (s >= 0)
        close(s);
    errno = saved;
    return ok;
}

static int sock_type(int fd) {
    int type = 0;
    socklen_t len = sizeof type;
    if (getsockopt(fd, SOL_SOCKET, SO_TYPE, &type, &len) != 0)
        return -1;
    return type;
}

static int is_ip(const struct sockaddr *sa, socklen_t len) {
    return sa && ((sa->sa_family == AF_INET && len >= sizeof(struct sockaddr_in)) ||
                  (sa->sa_family == AF_INET6 && len >= sizeof(struct sockaddr_in6)));
}

/* sendto/sendmsg with an address: a connected TCP socket ignores it (nothing to ask);
 * otherwise it opens a connection (TCP Fast Open) or sends a datagram: asked. */
static int fresh_ok(int fd, const struct sockaddr *sa) {
    int type = sock_type(fd);
    struct sockaddr_storage peer;
    socklen_t plen = sizeof peer;
    if (type == SOCK_STREAM && getpeername(fd, (struct sockaddr *)&peer, &plen) == 0)
        return 1;
    return ask(sa, type);
}

int connect(int fd, const struct sockaddr *sa, socklen_t len) {
    static connect_t real;
    if (!real)
        real = (connect_t)next("connect");
    if (is_ip(sa, len)) {
        struct sockaddr_storage peer;
        socklen_t plen = sizeof peer;
        int type = sock_type(fd);
        /* already connected (a second connect() says EISCONN): asked before */
        if (type == SOCK_STREAM && getpeername(fd, (struct sockaddr *)&peer, &plen) == 0)
            return real(fd, sa, len);
        if (!ask(sa, type)) {
            errno = ECONNREFUSED;
            return -1;
        }
    }
    return real(fd, sa, len);
}

ssize_t sendto(int fd, const void *buf, size_t n, int flags, const struct sockaddr *sa, socklen_t len) {
    static sendto_t real;
    if (!real)
        real = (sendto_t)next("sendto");
    if (is_ip(sa, len) && !fresh_ok(fd, sa)) {
        errno = EACCES;
        return -1;
    }
    return real(fd, buf, n, flags, sa, len);
}

ssize_t sendmsg(int fd, const struct msghdr *msg, int flags) {
    static sendmsg_t real;
    if (!real)
        real = (sendmsg_t)next("sendmsg");
    if (msg && is_ip(msg->msg_name, msg->msg_namelen) && !fresh_ok(fd, msg->msg_name)) {
        errno = EACCES;
        return -1;
    }
    return real(fd, msg, flags);
}

int sendmmsg(int fd, struct mmsghdr *v, unsigned int n, int flags) {
    static sendmmsg_t real;
    if (!real)
        real = (sendmmsg_t)next("sendmmsg");
    for (unsigned int i = 0; v && i < n; i++)
        if (is_ip(v[i].msg_hdr.msg_name, v[i].msg_hdr.msg_namelen) && !fresh_ok(fd, v[i].msg_hdr.msg_name)) {
            errno = EACCES;
            return -1;
        }
    return real(fd, v, n, flags);
}

static int literal(const char *name) {
    unsigned char buf[sizeof(struct in6_addr)];
    return inet_pton(AF_INET, name, buf) == 1 || inet_pton(AF_INET6, name, buf) == 1;
}

int getaddrinfo(const char *node, const char *service, const struct addrinfo *hints, struct addrinfo **res) {
    if (node && !literal(node))
        return EAI_NONAME;
    return ((gai_t)next("getaddrinfo"))(node, service, hints, res);
}

struct hostent *gethostbyname(const char *name) {
    if (!name || !literal(name)) {
        h_errno = HOST_NOT_FOUND;
        return NULL;
    }
    return ((ghbn_t)next("gethostbyname"))(name);
}

struct hostent *gethostbyname2(const char *name, int af) {
    if (!name || !literal(name)) {
        h_errno = HOST_NOT_FOUND;
        return NULL;
    }
    return ((ghbn2_t)next("gethostbyname2"))(name, af);
}

int gethostbyname_r(const char *name, struct hostent *ret, char *buf, size_t len, struct hostent **result, int *herr) {
    if (!name || !literal(name)) {
        *result = NULL;
        *herr = HOST_NOT_FOUND;
        return 0;
    }
    return ((ghbnr_t)next("gethostbyname_r"))(name, ret, buf, len, result, herr);
}
