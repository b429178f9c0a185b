package main

import (
	"context"
	"fmt"
	"io"
	"runtime"
	"runtime/debug"

	"github.com/prometheus/client_golang/prometheus"
)

// buildVersion is what the binary knows of its own build: the module
// version, the VCS stamp the go command embeds (vcs.revision, vcs.time,
// vcs.modified) and the Go version.
type buildVersion struct {
	Module    string
	Version   string // "(devel)" for a build from a work tree
	Revision  string // "" when the build was not stamped
	Time      string
	Modified  bool
	GoVersion string
}

// unknown stands for a field the build did not record.
const unknown = "unknown"

// The image build stamps these with -ldflags "-X main.stampedVersion=…"
// (deploy/Dockerfile's GILF_VERSION, GILF_REVISION, GILF_BUILD_TIME): its
// build context has no .git, so the go command embeds no VCS stamp, and
// a module built from a work tree is "(devel)". They are set by the
// linker and never written at run time; empty means not stamped.
var (
	stampedVersion  string
	stampedRevision string
	stampedTime     string
)

// readBuildVersion reads the running binary's build information, the
// linker's stamps over what the go command recorded.
func readBuildVersion() buildVersion {
	bi, ok := debug.ReadBuildInfo()
	return versionOf(bi, ok).stamped(stampedVersion, stampedRevision, stampedTime)
}

// stamped is v with each non-empty stamp in place of what the go command
// recorded.
func (v buildVersion) stamped(version, revision, at string) buildVersion {
	if version != "" {
		v.Version = version
	}
	if revision != "" {
		v.Revision, v.Modified = revision, false
	}
	if at != "" {
		v.Time = at
	}
	return v
}

// versionOf turns build information into a buildVersion; without any
// (a binary built without module support), only the Go version is known.
func versionOf(bi *debug.BuildInfo, ok bool) buildVersion {
	v := buildVersion{Version: unknown, GoVersion: runtime.Version()}
	if !ok || bi == nil {
		return v
	}
	v.Module = bi.Main.Path
	if bi.Main.Version != "" {
		v.Version = bi.Main.Version
	}
	if bi.GoVersion != "" {
		v.GoVersion = bi.GoVersion
	}
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			v.Revision = s.Value
		case "vcs.time":
			v.Time = s.Value
		case "vcs.modified":
			v.Modified = s.Value == "true"
		}
	}
	return v
}

// write prints the version, one field a line.
func (v buildVersion) write(w io.Writer) error {
	rev, at := v.Revision, v.Time
	if rev == "" {
		rev = unknown
	}
	if at == "" {
		at = unknown
	}
	if v.Modified {
		rev += " (modified)"
	}
	_, err := fmt.Fprintf(w, "gilf %s\nmodule:   %s\nrevision: %s\ntime:     %s\ngo:       %s\n",
		v.Version, v.Module, rev, at, v.GoVersion)
	return err
}

// buildInfoMetric is gilf_build_info{version,revision,goversion} 1.
func buildInfoMetric(v buildVersion) prometheus.Collector {
	rev := v.Revision
	if rev == "" {
		rev = unknown
	}
	g := prometheus.NewGauge(prometheus.GaugeOpts{
		Name:        "gilf_build_info",
		Help:        "The build of this gilf process (always 1): module version, VCS revision and Go version.",
		ConstLabels: prometheus.Labels{"version": v.Version, "revision": rev, "goversion": v.GoVersion},
	})
	g.Set(1)
	return g
}

const versionUsage = `usage: gilf version

Print the module version, VCS revision and time, and the Go version of
this binary.
`

func runVersion(_ context.Context, env Env, args []string) int {
	if len(args) > 0 {
		if args[0] == "-h" || args[0] == "--help" {
			fmt.Fprint(env.Stderr, versionUsage)
			return exitOK
		}
		fmt.Fprintf(env.Stderr, "gilf version: unexpected arguments %q\n", args)
		return exitUsage
	}
	if err := readBuildVersion().write(env.Stdout); err != nil {
		fmt.Fprintf(env.Stderr, "gilf version: %v\n", err)
		return exitUsage
	}
	return exitOK
}
