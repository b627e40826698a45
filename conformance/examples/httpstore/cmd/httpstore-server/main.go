// Command httpstore-server runs the example in-memory HTTP object store, to
// try the httpstore adapter by hand:
//
//	httpstore-server -addr 127.0.0.1:8080 -bucket test
//	conformance run --adapter ./retain-adapter-httpstore --sha256 <digest> --store http://127.0.0.1:8080/test
//
// Its objects live in memory and are gone when it exits.
package main

import (
	"flag"
	"fmt"
	"log"
	"net"
	"net/http"
	"os"
	"strings"

	"github.com/retain-dev/retain/conformance/examples/httpstore/server"
)

func main() {
	addr := flag.String("addr", "127.0.0.1:8080", "address to listen on")
	buckets := flag.String("bucket", "test", "comma-separated buckets to create at start")
	token := flag.String("token", "", "bearer token every request must carry (the adapter sends $HTTPSTORE_TOKEN)")
	maxObject := flag.Int64("max-object-size", server.DefaultMaxObjectSize, "largest object accepted, in bytes")
	flag.Parse()
	var names []string
	for _, b := range strings.Split(*buckets, ",") {
		if b = strings.TrimSpace(b); b != "" {
			names = append(names, b)
		}
	}
	srv := server.New(server.Config{MaxObjectSize: *maxObject, Token: *token}, names...)
	ln, err := net.Listen("tcp", *addr)
	if err != nil {
		fmt.Fprintf(os.Stderr, "httpstore-server: %v (choose another address with -addr)\n", err)
		os.Exit(2)
	}
	log.Printf("httpstore-server: serving buckets %v on http://%s", names, ln.Addr())
	log.Fatal(http.Serve(ln, srv))
}
