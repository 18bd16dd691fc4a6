// Command watchstat asks the front end's server of a state directory
// about the workspaces it watches (the watchers' "status" request) and
// prints the answer as JSON, one line. With -wait ROOT it first waits until the
// watcher of ROOT has finished setting up, for at most -timeout: while it
// walks the tree its status is only its root and "watch starting"; once
// set up it counts its watches (the reason stays "watch starting" until a
// checkpoint after the set-up records a base).
//
//	watchstat [-wait ROOT] [-timeout 10m] STATEDIR
package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"time"

	"github.com/undosh/undosh/internal/state"
	"github.com/undosh/undosh/internal/watchd"
)

func main() {
	wait := flag.String("wait", "", "wait until the watcher of this root is set up")
	timeout := flag.Duration("timeout", 10*time.Minute, "how long -wait waits")
	flag.Parse()
	if flag.NArg() != 1 {
		fmt.Fprintln(os.Stderr, "usage: watchstat [-wait ROOT] [-timeout D] STATEDIR")
		os.Exit(2)
	}
	sock := state.SocketPath(flag.Arg(0))
	deadline := time.Now().Add(*timeout)
	for {
		a, err := watchd.Ask(sock, watchd.Request{Op: "status"}, 5*time.Second)
		if err != nil {
			fmt.Fprintln(os.Stderr, "watchstat:", err)
			os.Exit(1)
		}
		ready := true
		if *wait != "" {
			ready = false
			for _, s := range a.Status {
				if s.Root == *wait && s.Watches > 0 {
					ready = true
				}
			}
		}
		if ready {
			b, _ := json.Marshal(a.Status)
			fmt.Println(string(b))
			return
		}
		if time.Now().After(deadline) {
			fmt.Fprintf(os.Stderr, "watchstat: %s not set up after %v\n", *wait, *timeout)
			os.Exit(1)
		}
		time.Sleep(100 * time.Millisecond)
	}
}
