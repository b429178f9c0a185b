// Package egress is the only way out of a sandboxed install step (SPEC
// §4.2, §7 egress): an allow-list, a forward proxy that enforces it, and the
// bridge that carries the sandbox's connections to the proxy.
//
// The install step runs in its own network namespace, which has nothing
// but loopback. The worker runs a Proxy on a unix socket that is
// bind-mounted into the sandbox; inside, the bridge (the gilf binary run as
// BridgeArg in front of the step) listens on SandboxProxyAddr and forwards
// every TCP connection to that socket, so package managers are simply told
// HTTP_PROXY=http://127.0.0.1:3128.
//
// The proxy decides every destination itself and trusts no byte the
// sandbox sends: a destination must match a Rule, is resolved on the
// worker, and only addresses that Classify finds globally routable (and
// not the worker's own) are dialed, by address, never by name, so the
// answer cannot change between the check and the dial. The one way to
// reach loopback or a private address is an allow-list entry naming that
// exact IP literal and port ("127.0.0.1:4873"), for a local registry; a
// link-local address (cloud metadata) is never reached.
//
// The threat: the install step runs the pull request's code (its own and
// every dependency's lifecycle scripts) and wants to reach the worker's
// loopback services, its LAN, the cloud metadata address, or any host to
// exfiltrate what it read. The kernel gives it no route but the proxy
// (its own network namespace, no resolver); the proxy gives it the
// allow-listed registries and nothing else. The bridge and the socket are
// inside the sandbox and may be attacked: they carry bytes only, every
// decision is the proxy's. Script steps get no proxy at all.
//
// Rules, Matches, Classify and Decide are pure; the Proxy adds resolution,
// dialing and the record of what was allowed and denied (Report). Nothing
// the proxy logs or records holds a request path or a header value: only
// hosts, ports, reasons, counts and bytes.
package egress
