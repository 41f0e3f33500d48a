// kstatus reads a Kubernetes List (kubectl get -o json) on stdin and prints, per object, the
// status the kstatus library computes for it: what Flux, kpt and cli-utils users see. One line
// per object: KIND/NAME<TAB>STATUS<TAB>MESSAGE. The semops tests compare these lines with what a
// model or catalog in each state must show.
package main

import (
	"bufio"
	"fmt"
	"io"
	"os"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/cli-utils/pkg/kstatus/status"
)

func main() {
	// Decoded as the API machinery decodes objects (integers stay int64, as kstatus expects).
	data, err := io.ReadAll(os.Stdin)
	if err != nil {
		fmt.Fprintf(os.Stderr, "kstatus: reading stdin: %v\n", err)
		os.Exit(2)
	}
	var list unstructured.UnstructuredList
	if err := list.UnmarshalJSON(data); err != nil {
		fmt.Fprintf(os.Stderr, "kstatus: stdin is not a Kubernetes List: %v\n", err)
		os.Exit(2)
	}
	out := bufio.NewWriter(os.Stdout)
	defer out.Flush()
	for i := range list.Items {
		u := &list.Items[i]
		res, err := status.Compute(u)
		if err != nil {
			fmt.Fprintf(os.Stderr, "kstatus: %s/%s: %v\n", u.GetKind(), u.GetName(), err)
			os.Exit(1)
		}
		fmt.Fprintf(out, "%s/%s\t%s\t%s\n", u.GetKind(), u.GetName(), res.Status, res.Message)
	}
}
