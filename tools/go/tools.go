//go:build tools

// Package tools pins the third-party Go command-line tools that netsurvey uses, so
// that their versions live in one place (this module's go.mod / go.sum).
//
// Nothing here is compiled into a program; the blank imports only make `go mod tidy`
// keep the requirements. Build the tools with scripts/build_go_tools.sh, e.g.
//
//	go build -o bin/zgrab2 github.com/zmap/zgrab2/cmd/zgrab2
//	go build -o bin/zdns   github.com/zmap/zdns/v2
package tools

import (
	_ "github.com/zmap/zdns/v2"
	_ "github.com/zmap/zgrab2/cmd/zgrab2"
)
