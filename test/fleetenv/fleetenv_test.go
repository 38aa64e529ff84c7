package fleetenv

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"net/url"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// TestSpokesAndHelpers starts a hub and two spokes and exercises the spoke
// helpers: nodes with allocatable capacity, pods with requests, and
// kubeconfig files that work.
func TestSpokesAndHelpers(t *testing.T) {
	ctx := t.Context()
	f, err := Start(ctx, Options{Spokes: []string{"east", "west"}, NoPlacementController: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := f.Stop(); err != nil {
			t.Error(err)
		}
	})

	east := f.Spoke("east")
	if east == nil || f.Spoke("west") == nil || f.Spoke("north") != nil {
		t.Fatalf("Spoke lookup: east=%v west=%v north=%v", east, f.Spoke("west"), f.Spoke("north"))
	}
	if _, err := east.CreateNode(ctx, Node{Name: "big", CPU: "16", Memory: "64Gi", Labels: map[string]string{"kubevirt.io/schedulable": "true"}}); err != nil {
		t.Fatal(err)
	}
	if _, err := east.CreatePod(ctx, Pod{Namespace: "work", Name: "p1", Node: "big", CPU: "2", Memory: "4Gi"}); err != nil {
		t.Fatal(err)
	}

	var node corev1.Node
	if err := east.Client.Get(ctx, client.ObjectKey{Name: "big"}, &node); err != nil {
		t.Fatal(err)
	}
	if got := node.Status.Allocatable.Memory().String(); got != "64Gi" {
		t.Errorf("node allocatable memory = %s, want 64Gi", got)
	}
	var pod corev1.Pod
	if err := east.Client.Get(ctx, client.ObjectKey{Namespace: "work", Name: "p1"}, &pod); err != nil {
		t.Fatal(err)
	}
	if pod.Spec.NodeName != "big" || pod.Status.Phase != corev1.PodRunning || pod.Spec.Containers[0].Resources.Requests.Cpu().String() != "2" {
		t.Errorf("pod = node %q phase %q cpu %s, want big Running 2", pod.Spec.NodeName, pod.Status.Phase, pod.Spec.Containers[0].Resources.Requests.Cpu())
	}
	// The spokes are separate API servers: west does not see east's node.
	if err := f.Spoke("west").Client.Get(ctx, client.ObjectKey{Name: "big"}, &corev1.Node{}); err == nil {
		t.Error("west sees east's node: spokes share an API server")
	}
	// The hub has the OCM CRDs, the spokes have KubeVirt's.
	for cluster, crd := range map[*Cluster]string{f.Hub: "placements.cluster.open-cluster-management.io", east: "virtualmachines.kubevirt.io"} {
		if err := cluster.Client.Get(ctx, client.ObjectKey{Name: crd}, newCRD()); err != nil {
			t.Errorf("%s: CRD %s: %v", cluster.Name, crd, err)
		}
	}
	// The kubeconfig file works on its own.
	cfg, err := RestConfigFromKubeconfig(east.Kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	c, err := client.New(cfg, client.Options{Scheme: f.Scheme})
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Get(ctx, client.ObjectKey{Name: "big"}, &corev1.Node{}); err != nil {
		t.Errorf("client from %s: %v", east.Kubeconfig, err)
	}
}

// TestNoProcessSurvives kills a process running a fleet with SIGKILL, so no
// cleanup code runs, and checks that its API server and etcd die with it.
func TestNoProcessSurvives(t *testing.T) {
	if os.Getenv("FLEETENV_CHILD") != "" {
		t.Skip("child")
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestFleetChild$", "-test.v")
	cmd.Env = append(os.Environ(), "FLEETENV_CHILD=1")
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })

	var endpoints []string
	found := make(chan error, 1)
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			if rest, ok := strings.CutPrefix(sc.Text(), "ENDPOINTS "); ok {
				endpoints = strings.Fields(rest)
				found <- nil
				break
			}
		}
		found <- fmt.Errorf("child exited without printing its endpoints")
	}()
	select {
	case err := <-found:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(60 * time.Second):
		t.Fatal("child fleet did not start within 60s")
	}
	for _, ep := range endpoints {
		if !listening(ep) {
			t.Fatalf("%s not listening while the child runs: the check below would prove nothing", ep)
		}
	}
	// The processes the child started (kube-apiserver and etcd for each
	// of its two clusters, and whatever wraps them), by PID and start
	// time: a port can be taken again by another test's server, a
	// process cannot come back.
	procs := descendants(cmd.Process.Pid)
	if len(procs) < 4 {
		t.Fatalf("the child runs %d processes, want at least 4 (an API server and etcd per cluster): %v", len(procs), procs)
	}
	if err := cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	_ = cmd.Wait()
	err = Eventually(context.Background(), 15*time.Second, func() (bool, error) {
		for _, p := range procs {
			if p.alive() {
				return false, nil
			}
		}
		return true, nil
	})
	if err != nil {
		for _, p := range procs {
			if p.alive() {
				t.Errorf("%s (pid %d) still runs after its test process was killed", p.comm, p.pid)
			}
		}
	}
}

// proc is a process, told apart from a later one with the same PID by its
// start time.
type proc struct {
	pid   int
	start string
	comm  string
}

// stat reads a process' parent, start time and name from /proc; ok is
// false when it is gone or a zombie.
func stat(pid int) (ppid int, start, comm string, ok bool) {
	raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, "", "", false
	}
	// pid (comm) state ppid ... starttime is field 22; comm may hold
	// spaces and parentheses, so split after its last ')'.
	s := string(raw)
	end := strings.LastIndexByte(s, ')')
	if end < 0 {
		return 0, "", "", false
	}
	comm = s[strings.IndexByte(s, '(')+1 : end]
	f := strings.Fields(s[end+1:])
	if len(f) < 20 || f[0] == "Z" || f[0] == "X" {
		return 0, "", "", false
	}
	ppid, _ = strconv.Atoi(f[1])
	return ppid, f[19], comm, true
}

func (p proc) alive() bool {
	_, start, _, ok := stat(p.pid)
	return ok && start == p.start
}

// descendants lists every process below pid.
func descendants(pid int) []proc {
	entries, _ := os.ReadDir("/proc")
	children := map[int][]proc{}
	for _, e := range entries {
		n, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if ppid, start, comm, ok := stat(n); ok {
			children[ppid] = append(children[ppid], proc{pid: n, start: start, comm: comm})
		}
	}
	var out []proc
	queue := []int{pid}
	for len(queue) > 0 {
		for _, c := range children[queue[0]] {
			out = append(out, c)
			queue = append(queue, c.pid)
		}
		queue = queue[1:]
	}
	return out
}

// TestFleetChild is the child of TestNoProcessSurvives: it starts a fleet,
// prints the endpoints, and waits to be killed.
func TestFleetChild(t *testing.T) {
	if os.Getenv("FLEETENV_CHILD") == "" {
		t.Skip("only run as the child of TestNoProcessSurvives")
	}
	f, err := Start(t.Context(), Options{Spokes: []string{"spoke"}, NoPlacementController: true})
	if err != nil {
		t.Fatal(err)
	}
	var eps []string
	for _, c := range []*Cluster{f.Hub, f.Spoke("spoke")} {
		api, etcd := c.URLs()
		eps = append(eps, hostPort(api), hostPort(etcd))
	}
	fmt.Println("ENDPOINTS " + strings.Join(eps, " "))
	<-t.Context().Done()
}

func hostPort(raw string) string {
	u, err := url.Parse(raw)
	if err != nil {
		return raw
	}
	return u.Host
}

func listening(addr string) bool {
	conn, err := net.DialTimeout("tcp", addr, time.Second)
	if err != nil {
		return false
	}
	_ = conn.Close()
	return true
}

func TestFreePortsBelowTheEphemeralRange(t *testing.T) {
	ports, err := FreePorts(20)
	if err != nil {
		t.Fatal(err)
	}
	seen := map[int]bool{}
	for _, p := range ports {
		if seen[p] {
			t.Fatalf("port %d returned twice in %v", p, ports)
		}
		seen[p] = true
		if p >= EphemeralLow() {
			t.Fatalf("port %d is in the ephemeral range (from %d): an outgoing connection may take it", p, EphemeralLow())
		}
		l, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(p)))
		if err != nil {
			t.Fatalf("port %d is not free: %v", p, err)
		}
		_ = l.Close()
	}
}
