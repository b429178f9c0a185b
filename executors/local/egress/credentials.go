package egress

import (
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
)

// MaxCredentialBytes bounds one credentials file.
const MaxCredentialBytes = 16 << 10

// ReadCredentials reads the registries' credentials as
// GILF_INSTALL_REGISTRY_CREDENTIALS names them: comma-separated
// "host[:port]=/path/to/file" entries. Each file holds one token (sent
// as "Bearer <token>") or a whole Authorization value ("Bearer …",
// "Basic …"). A host without a port is both its https and http ports.
// The result is UpstreamConfig.Credentials. Every bad entry is reported
// at once; no error repeats a file's content.
func ReadCredentials(spec string) (map[string]string, error) {
	out := map[string]string{}
	var errs []error
	for e := range strings.SplitSeq(spec, ",") {
		e = strings.TrimSpace(e)
		if e == "" {
			continue
		}
		hostText, path, ok := strings.Cut(e, "=")
		if !ok || !strings.HasPrefix(path, "/") {
			errs = append(errs, fmt.Errorf("credentials entry %q: want host[:port]=/absolute/path", e))
			continue
		}
		r, err := ParseRule(hostText)
		if err != nil || r.Wildcard {
			errs = append(errs, fmt.Errorf("credentials entry %q: want one host, no wildcard", hostText))
			continue
		}
		v, err := readCredential(path)
		if err != nil {
			errs = append(errs, fmt.Errorf("credentials for %s: %w", hostText, err))
			continue
		}
		ports := []int{r.Port}
		if r.Port == 0 {
			ports = []int{PortHTTPS, PortHTTP}
		}
		for _, p := range ports {
			k := hostPortString(r.Host, p)
			if _, dup := out[k]; dup {
				errs = append(errs, fmt.Errorf("credentials for %s are given twice", k))
			}
			out[k] = v
		}
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	return out, nil
}

// readCredential reads one credentials file into an Authorization value.
func readCredential(path string) (string, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", err
	}
	defer f.Close() // read-only
	b, err := io.ReadAll(io.LimitReader(f, MaxCredentialBytes+1))
	if err != nil {
		return "", err
	}
	if len(b) > MaxCredentialBytes {
		return "", fmt.Errorf("%s is over %d bytes", path, MaxCredentialBytes)
	}
	v := strings.TrimSpace(string(b))
	switch {
	case v == "":
		return "", fmt.Errorf("%s is empty", path)
	case strings.ContainsAny(v, "\r\n\x00"):
		return "", fmt.Errorf("%s holds more than one line", path)
	case strings.HasPrefix(v, "Bearer ") || strings.HasPrefix(v, "Basic "):
		return v, nil
	case strings.ContainsAny(v, " \t"):
		return "", fmt.Errorf("%s is neither a token nor a Bearer or Basic value", path)
	}
	return "Bearer " + v, nil
}
