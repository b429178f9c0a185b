// Package egress is the only way out of a sandboxed install step (SPEC
// §4.2, §7 egress): an allow-list, a forward proxy that enforces it, and the
// bridge that carries the sandbox's connections to the proxy.
//
// The install step runs in its own network namespace, which has nothing
// but loopback. The worker runs a Proxy on a unix socket that is
// bind-mounted into the sandbox; inside, the bridge (the gilf binary run as
// BridgeArg in front of the step) listens on SandboxProxyAddr, so package
// managers are simply told HTTP_PROXY=http://127.0.0.1:3128, and hands
// every TCP connection it accepts over to the proxy: it sends the socket's
// descriptor on its own connection to the unix socket (SCM_RIGHTS) and
// closes its copies. The proxy then serves the TCP connection itself: the
// bytes no longer pass through a process inside the sandbox, which cost a
// second hop (half the throughput on a small host), and a tunnel splices
// from TCP to TCP in the kernel.
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
// inside the sandbox and may be attacked: they hand over connections
// only, every decision is the proxy's. Anything in the sandbox can send
// any descriptor on the socket, so the proxy takes one only as a handoff
// of exactly one TCP socket that is not listening, closes every other it
// receives, and only reads and writes the socket it takes (never binds
// or connects it: the socket lives in the sandbox's network namespace and
// reaches nothing the sandbox could not). A descriptor stays shared with
// whatever in the sandbox kept a copy, which may switch it to blocking
// mode (clear O_NONBLOCK on the open file they share): the proxy's reads
// and writes of it would then wait in the kernel, out of reach of every
// deadline, each holding an OS thread, until enough of them crashed the
// worker at the runtime's thread limit. So a watchdog checks each
// handed-over connection's file status flags every BlockingCheckInterval
// and, the first time it finds the connection in blocking mode, records
// the refusal (ReasonTampered) and hangs up: shutdown(2) wakes whatever
// waits in the kernel, then the connection (and a tunnel's upstream) is
// closed. Until that check a read or write may wait in the kernel, at
// most one per goroutine serving the connection (two in a tunnel), which
// bounds how long a thread is held, though not, while the sandbox keeps
// opening connections, how many at once (see watchdog). The check sees
// the flag, not the wait: a sandbox that clears the flag and sets it
// again between two checks can still leave a read or write waiting
// until data comes, the client leaves, or Close. The
// proxy shuts its connections down before closing them, so Close ends
// every one. Script steps get no proxy at all.
//
// What goes out is requests, never bytes the proxy cannot read: with a
// CA (the worker's, made once under its data directory and trusted by
// the sandbox through its CA bundle) the proxy terminates the TLS of
// every CONNECT to an allow-listed registry and serves the requests
// inside itself, as it serves plain-HTTP ones (serveRequest): only GET
// and HEAD without a body leave (ReasonMethod otherwise); they go out
// through one pool of upstream connections the worker's proxies share
// (Upstreams: keep-alive, HTTP/2, credentials added per registry); and
// tarballs and metadata come from a verifying cache (Cache) when it can
// serve them. Only hosts named as Tunnels stay opaque TLS tunnels.
//
// Rules, Matches, Classify and Decide are pure; the Proxy adds resolution,
// dialing and the record of what was allowed and denied (Report). Nothing
// the proxy logs or records holds a request path or a header value: only
// hosts, ports, reasons, counts and bytes.
package egress
