// zoo-gotls: the testbed's Go crypto/tls host (issue 24). A stock net/http HTTPS server:
// the tls.Config sets only the certificate, so sessions, tickets, ticket keys and their
// rotation are Go's defaults (src/crypto/tls/common.go, ticket.go,
// handshake_server*.go of the Go that built this binary; it prints runtime.Version()).
//
//	zoo-gotls -cert C -key K -listen 198.18.124.10:443 -listen [2001:2:0:124::10]:443
package main

import (
	"crypto/tls"
	"flag"
	"fmt"
	"log"
	"net"
	"net/http"
	"os"
	"runtime"
	"strings"
)

type listFlag []string

func (l *listFlag) String() string     { return strings.Join(*l, ",") }
func (l *listFlag) Set(s string) error { *l = append(*l, s); return nil }

func main() {
	var listen listFlag
	cert := flag.String("cert", "", "PEM certificate chain")
	key := flag.String("key", "", "PEM private key")
	flag.Var(&listen, "listen", "address:port to serve HTTPS on (repeatable)")
	flag.Parse()
	if *cert == "" || *key == "" || len(listen) == 0 {
		fmt.Fprintln(os.Stderr, "zoo-gotls: -cert, -key and at least one -listen are required")
		os.Exit(2)
	}
	pair, err := tls.LoadX509KeyPair(*cert, *key)
	if err != nil {
		fmt.Fprintln(os.Stderr, "zoo-gotls:", err)
		os.Exit(2)
	}
	cfg := &tls.Config{Certificates: []tls.Certificate{pair}} // everything else: Go's defaults
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Server", "zoo-gotls/"+runtime.Version())
		fmt.Fprintf(w, "zoo-gotls %s\n", runtime.Version())
	})
	log.Printf("zoo-gotls %s listening on %v", runtime.Version(), listen)
	errs := make(chan error, len(listen))
	for _, a := range listen {
		ln, err := net.Listen("tcp", a)
		if err != nil {
			fmt.Fprintln(os.Stderr, "zoo-gotls:", err)
			os.Exit(1)
		}
		srv := &http.Server{Handler: h}
		go func() { errs <- srv.Serve(tls.NewListener(ln, cfg)) }()
	}
	log.Fatal(<-errs)
}
