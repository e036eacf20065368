// Command etcd is the etcd server, built from its Go module: kube-apiserver v1.36 is tested
// against etcd v3.6, and the upstream binary is a thin main over the same package.
package main

import (
	"os"

	"go.etcd.io/etcd/server/v3/etcdmain"
)

func main() {
	etcdmain.Main(os.Args)
}
