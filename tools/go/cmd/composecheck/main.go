// composecheck validates Compose files offline with compose-go, the loader that
// Docker Compose v2 uses (so it accepts the same modern fields and rejects the same
// mistakes: unknown keys, duplicate YAML keys, wrong types, undefined references).
//
//	composecheck [-f docker-compose.yml ...] [--profile NAME ...] [-q | -json]
//
// -json prints the loaded project (interpolated, normalized) as JSON instead.
//
// Exit status: 0 if the project loads, 1 if it is invalid, 2 on bad usage.
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"strings"

	"github.com/compose-spec/compose-go/v2/cli"
)

type multiFlag []string

func (m *multiFlag) String() string { return strings.Join(*m, ",") }

func (m *multiFlag) Set(v string) error {
	*m = append(*m, v)
	return nil
}

func main() {
	var files, profiles multiFlag
	var quiet, asJSON bool
	fs := flag.NewFlagSet("composecheck", flag.ContinueOnError)
	fs.Var(&files, "f", "compose file (repeatable; default docker-compose.yml)")
	fs.Var(&files, "file", "same as -f")
	fs.Var(&profiles, "profile", "profile to enable (repeatable)")
	fs.BoolVar(&quiet, "q", false, "print nothing when valid")
	fs.BoolVar(&asJSON, "json", false, "print the loaded project as JSON")
	if err := fs.Parse(os.Args[1:]); err != nil {
		os.Exit(2)
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(os.Stderr, "composecheck: unexpected arguments: %v\n", fs.Args())
		os.Exit(2)
	}
	if len(files) == 0 {
		files = multiFlag{"docker-compose.yml"}
	}

	opts, err := cli.NewProjectOptions(
		files,
		cli.WithOsEnv,
		cli.WithDotEnv,
		cli.WithProfiles(profiles),
		cli.WithConsistency(true),
		cli.WithResolvedPaths(true),
		cli.WithInterpolation(true),
		cli.WithNormalization(true),
	)
	if err != nil {
		fmt.Fprintf(os.Stderr, "composecheck: %v\n", err)
		os.Exit(1)
	}
	project, err := opts.LoadProject(context.Background())
	if err != nil {
		fmt.Fprintf(os.Stderr, "composecheck: invalid: %v\n", err)
		os.Exit(1)
	}
	if asJSON {
		out, err := json.Marshal(project)
		if err != nil {
			fmt.Fprintf(os.Stderr, "composecheck: %v\n", err)
			os.Exit(1)
		}
		fmt.Println(string(out))
		return
	}
	if !quiet {
		fmt.Printf("ok: project %q, services: %s\n", project.Name,
			strings.Join(project.ServiceNames(), ", "))
	}
}
