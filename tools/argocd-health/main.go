// argocd-health evaluates semops' Argo CD health checks the way Argo CD does: gopher-lua (Lua
// 5.1) with only the libraries Argo CD opens for an argocd-cm health script without useOpenLibs
// (package, base, table and a safe os with time/date; no string, math or io; built-in scripts
// get the standard libraries too, so this sandbox is the stricter of the two), the object as the
// global `obj`, the script run as a chunk whose returned table is read as {status, message}, and
// a one-second limit.
//
//	argocd-health test DIR   runs every DIR/<group>/<Kind>/health_test.yaml (Argo CD's upstream
//	                         layout: each test names testdata/*.yaml and the expected status and
//	                         message); exit 1 on any mismatch
//	argocd-health eval DIR   reads a Kubernetes List (kubectl get -o json) on stdin and prints
//	                         KIND/NAME<TAB>STATUS<TAB>MESSAGE per object, using the script of
//	                         its group and kind under DIR
package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	lua "github.com/yuin/gopher-lua"
	"sigs.k8s.io/yaml"
)

type healthStatus struct {
	Status  string `json:"status"`
	Message string `json:"message,omitempty"`
}

// The statuses Argo CD accepts; any other string becomes Unknown, as in Argo CD.
var validStatus = map[string]bool{
	"Healthy": true, "Progressing": true, "Degraded": true,
	"Suspended": true, "Missing": true, "Unknown": true,
}

func main() {
	if len(os.Args) != 3 || (os.Args[1] != "test" && os.Args[1] != "eval") {
		fmt.Fprintln(os.Stderr, "usage: argocd-health test|eval DIR")
		os.Exit(2)
	}
	var err error
	if os.Args[1] == "test" {
		err = runTests(os.Args[2])
	} else {
		err = evalList(os.Args[2], os.Stdin, os.Stdout)
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "argocd-health: %v\n", err)
		os.Exit(1)
	}
}

// health runs one script over one object.
func health(script string, obj map[string]any) (healthStatus, error) {
	l := lua.NewState(lua.Options{SkipOpenLibs: true})
	defer l.Close()
	for _, lib := range []struct {
		name string
		open lua.LGFunction
	}{
		{lua.LoadLibName, lua.OpenPackage},
		{lua.BaseLibName, lua.OpenBase},
		{lua.TabLibName, lua.OpenTable},
		{lua.OsLibName, openSafeOs},
	} {
		if err := l.CallByParam(lua.P{Fn: l.NewFunction(lib.open), Protect: true}, lua.LString(lib.name)); err != nil {
			return healthStatus{}, err
		}
	}
	l.PreloadModule(lua.OsLibName, openSafeOs)
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	l.SetContext(ctx)
	l.SetGlobal("obj", toLua(l, obj))
	if err := l.DoString(script); err != nil {
		return healthStatus{}, err
	}
	ret := l.Get(-1)
	switch ret.Type() {
	case lua.LTNil:
		return healthStatus{}, nil
	case lua.LTTable:
	default:
		return healthStatus{}, fmt.Errorf("expect table output from Lua script, not %s", ret.Type())
	}
	table := ret.(*lua.LTable)
	var hs healthStatus
	if s, ok := table.RawGetString("status").(lua.LString); ok {
		hs.Status = string(s)
	}
	if m, ok := table.RawGetString("message").(lua.LString); ok {
		hs.Message = string(m)
	}
	if !validStatus[hs.Status] {
		return healthStatus{Status: "Unknown", Message: "Lua returned an invalid health status"}, nil
	}
	return hs, nil
}

// openSafeOs registers an os table with only time and date: Argo CD withholds exit, execute,
// getenv, remove and the rest from health scripts.
func openSafeOs(l *lua.LState) int {
	mod := l.RegisterModule(lua.OsLibName, map[string]lua.LGFunction{
		"time": func(l *lua.LState) int { l.Push(lua.LNumber(time.Now().Unix())); return 1 },
		"date": func(l *lua.LState) int { l.Push(lua.LString(time.Now().UTC().Format(time.RFC3339))); return 1 },
	})
	l.Push(mod)
	return 1
}

// toLua converts decoded JSON/YAML into Lua values the way Argo CD does (numbers become Lua
// numbers, maps tables keyed by string, arrays sequences).
func toLua(l *lua.LState, value any) lua.LValue {
	switch v := value.(type) {
	case bool:
		return lua.LBool(v)
	case float64:
		return lua.LNumber(v)
	case string:
		return lua.LString(v)
	case []any:
		t := l.CreateTable(len(v), 0)
		for _, item := range v {
			t.Append(toLua(l, item))
		}
		return t
	case map[string]any:
		t := l.CreateTable(0, len(v))
		for k, item := range v {
			t.RawSetH(lua.LString(k), toLua(l, item))
		}
		return t
	}
	return lua.LNil
}

func scriptFor(dir string, obj map[string]any) (string, error) {
	apiVersion, _ := obj["apiVersion"].(string)
	kind, _ := obj["kind"].(string)
	group := strings.SplitN(apiVersion, "/", 2)[0]
	data, err := os.ReadFile(filepath.Join(dir, group, kind, "health.lua"))
	return string(data), err
}

func runTests(dir string) error {
	scripts, err := filepath.Glob(filepath.Join(dir, "*", "*", "health.lua"))
	if err != nil || len(scripts) == 0 {
		return fmt.Errorf("no %s/<group>/<Kind>/health.lua found", dir)
	}
	failed, ran := 0, 0
	for _, path := range scripts {
		kindDir := filepath.Dir(path)
		script, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		var suite struct {
			Tests []struct {
				InputPath    string       `json:"inputPath"`
				HealthStatus healthStatus `json:"healthStatus"`
			} `json:"tests"`
		}
		if err := readYAML(filepath.Join(kindDir, "health_test.yaml"), &suite); err != nil {
			return err
		}
		if len(suite.Tests) == 0 {
			return fmt.Errorf("%s/health_test.yaml has no tests", kindDir)
		}
		for _, test := range suite.Tests {
			ran++
			var obj map[string]any
			if err := readYAML(filepath.Join(kindDir, test.InputPath), &obj); err != nil {
				return err
			}
			got, err := health(string(script), obj)
			name := filepath.Join(kindDir, test.InputPath)
			switch {
			case err != nil:
				failed++
				fmt.Printf("FAIL %s: %v\n", name, err)
			case got != test.HealthStatus:
				failed++
				fmt.Printf("FAIL %s: got %+v, want %+v\n", name, got, test.HealthStatus)
			default:
				fmt.Printf("ok   %s: %s\n", name, got.Status)
			}
		}
	}
	if failed > 0 {
		return fmt.Errorf("%d of %d health tests failed", failed, ran)
	}
	fmt.Printf("%d health tests passed\n", ran)
	return nil
}

func readYAML(path string, into any) error {
	data, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	if err := yaml.Unmarshal(data, into); err != nil {
		return fmt.Errorf("%s: %v", path, err)
	}
	return nil
}

func evalList(dir string, in io.Reader, w io.Writer) error {
	var list struct {
		Items []map[string]any `json:"items"`
	}
	if err := json.NewDecoder(in).Decode(&list); err != nil {
		return fmt.Errorf("stdin is not a Kubernetes List: %v", err)
	}
	out := bufio.NewWriter(w)
	defer out.Flush()
	for _, obj := range list.Items {
		kind, _ := obj["kind"].(string)
		meta, _ := obj["metadata"].(map[string]any)
		name, _ := meta["name"].(string)
		script, err := scriptFor(dir, obj)
		if err != nil {
			return fmt.Errorf("%s/%s: %v", kind, name, err)
		}
		hs, err := health(script, obj)
		if err != nil {
			return fmt.Errorf("%s/%s: %v", kind, name, err)
		}
		fmt.Fprintf(out, "%s/%s\t%s\t%s\n", kind, name, hs.Status, hs.Message)
	}
	return nil
}
