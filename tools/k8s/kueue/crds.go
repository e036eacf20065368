//go:build crds

// Package crds keeps the modules whose CRD files the tests install (AppWrapper's, Gateway API's)
// in this module's graph, at the versions Kueue itself is built against: `go mod tidy` reads
// every build tag.
package crds

import (
	_ "github.com/project-codeflare/appwrapper/api/v1beta2"
	_ "sigs.k8s.io/gateway-api/apis/v1"
)
