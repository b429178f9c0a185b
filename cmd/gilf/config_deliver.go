package main

import (
	"errors"
	"net"
	"net/url"
	"strings"
)

// DeliverConfig is what `gilf deliver` reads of the environment: the
// webhook secret it signs with and where the local gilf serve listens.
type DeliverConfig struct {
	Secret Secret // GILF_WEBHOOK_SECRET
	// URL is the default target: POST /webhook on GILF_ADDR, its host
	// 127.0.0.1 when GILF_ADDR names none (or a wildcard).
	URL string
}

func loadDeliver(getenv func(string) string) (DeliverConfig, error) {
	c := DeliverConfig{Secret: NewSecret(getenv("GILF_WEBHOOK_SECRET"))}
	var errs []error
	if !c.Secret.IsSet() {
		errs = append(errs, errors.New("GILF_WEBHOOK_SECRET is not set: gilf deliver signs the payload with the secret gilf serve checks"))
	}
	addr := envOr(getenv, "GILF_ADDR", DefaultAddr)
	if err := checkAddr(addr); err != nil {
		errs = append(errs, err)
	} else {
		host, port, _ := net.SplitHostPort(addr)
		if host == "" || host == "0.0.0.0" || host == "::" {
			host = "127.0.0.1"
		}
		c.URL = (&url.URL{Scheme: "http", Host: net.JoinHostPort(strings.Trim(host, "[]"), port), Path: "/webhook"}).String()
	}
	return c, errors.Join(errs...)
}
