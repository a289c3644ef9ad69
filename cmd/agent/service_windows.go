package main

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"
	"unsafe"

	"golang.org/x/sys/windows"
	"golang.org/x/sys/windows/svc"
	"golang.org/x/sys/windows/svc/eventlog"
	"golang.org/x/sys/windows/svc/mgr"
)

// serviceName is the Windows service and event log source name.
const serviceName = "plumbline-agent"

const serviceUsage = `usage: agent service install --config FILE [--name NAME]
       agent service uninstall [--name NAME]
       agent service run [--name NAME] --config FILE

install registers the agent as an automatic (delayed start) Windows service
running "agent service run --config FILE" as LocalSystem, restarting on
failure, with an Application event log source of the same name. uninstall
stops and removes both. run is what the service control manager starts;
from a console it runs the agent in the foreground, like "agent run".
See deploy/windows/README.md.
`

func runService(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprint(stderr, serviceUsage)
		return 2
	}
	fl := flag.NewFlagSet("agent service "+args[0], flag.ContinueOnError)
	fl.SetOutput(stderr)
	name := fl.String("name", serviceName, "service and event log source name")
	switch args[0] {
	case "install":
		configFile := fl.String("config", "", "agent config file (required; an absolute path)")
		if fl.Parse(args[1:]) != nil || fl.NArg() > 0 || *configFile == "" {
			fmt.Fprint(stderr, serviceUsage)
			return 2
		}
		delayed, err := installService(*name, *configFile)
		if err != nil {
			fmt.Fprintf(stderr, "agent service install: %v\n", err)
			return 1
		}
		if delayed != nil {
			fmt.Fprintf(stderr, "agent service install: this system refused delayed auto-start (%v); service %s starts automatically without the delay\n", delayed, *name)
		}
		fmt.Fprintf(stdout, "service %s installed; start it with: sc.exe start %s\n", *name, *name)
		return 0
	case "uninstall":
		if fl.Parse(args[1:]) != nil || fl.NArg() > 0 {
			fmt.Fprint(stderr, serviceUsage)
			return 2
		}
		if err := uninstallService(*name); err != nil {
			fmt.Fprintf(stderr, "agent service uninstall: %v\n", err)
			return 1
		}
		fmt.Fprintf(stdout, "service %s removed\n", *name)
		return 0
	case "run":
		isService, err := svc.IsWindowsService()
		if err != nil {
			fmt.Fprintf(stderr, "agent service run: %v\n", err)
			return 1
		}
		rest, svcName := args[1:], serviceName
		if len(rest) >= 2 && (rest[0] == "--name" || rest[0] == "-name") {
			svcName, rest = rest[1], rest[2:]
		}
		if !isService {
			return runRun(ctx, rest, stdout, stderr)
		}
		return runAsService(svcName, rest)
	case "-h", "--help", "help":
		fmt.Fprint(stdout, serviceUsage)
		return 0
	}
	fmt.Fprintf(stderr, "agent service: unknown command %q\n\n%s", args[0], serviceUsage)
	return 2
}

// installService registers the service. Delayed auto-start is asked for
// after the service exists: where the system refuses it (older or partial
// implementations, e.g. Wine) the service stays installed with plain
// automatic start, and delayed says why.
func installService(name, configFile string) (delayed error, err error) {
	exe, err := os.Executable()
	if err != nil {
		return nil, err
	}
	cfg, err := filepath.Abs(configFile)
	if err != nil {
		return nil, err
	}
	if _, err := os.Stat(cfg); err != nil {
		return nil, fmt.Errorf("config: %w", err)
	}
	m, err := mgr.Connect()
	if err != nil {
		return nil, fmt.Errorf("connect to the service control manager (run as Administrator): %w", err)
	}
	defer m.Disconnect()
	if s, err := m.OpenService(name); err == nil {
		s.Close()
		return nil, fmt.Errorf("service %s already exists; uninstall it first", name)
	}
	s, err := m.CreateService(name, exe, mgr.Config{
		DisplayName:  "Plumbline agent",
		Description:  "Plumbline storage geometry and I/O probe agent: reports volume alignment and probe results to the Plumbline server.",
		StartType:    mgr.StartAutomatic,
		ErrorControl: mgr.ErrorNormal,
	}, "service", "run", "--name", name, "--config", cfg)
	if err != nil {
		return nil, fmt.Errorf("create service: %w", err)
	}
	defer s.Close()
	info := windows.SERVICE_DELAYED_AUTO_START_INFO{IsDelayedAutoStartUp: 1}
	if err := windows.ChangeServiceConfig2(s.Handle, windows.SERVICE_CONFIG_DELAYED_AUTO_START_INFO, (*byte)(unsafe.Pointer(&info))); err != nil {
		delayed = fmt.Errorf("SERVICE_CONFIG_DELAYED_AUTO_START_INFO: %w", err)
	}
	restart := mgr.RecoveryAction{Type: mgr.ServiceRestart, Delay: 30 * time.Second}
	if err := s.SetRecoveryActions([]mgr.RecoveryAction{restart, restart, restart}, uint32((24 * time.Hour).Seconds())); err != nil {
		s.Delete()
		return nil, fmt.Errorf("set recovery actions: %w", err)
	}
	if err := eventlog.InstallAsEventCreate(name, eventlog.Error|eventlog.Warning|eventlog.Info); err != nil && !strings.Contains(err.Error(), "exists") {
		s.Delete()
		return nil, fmt.Errorf("install event log source: %w", err)
	}
	return delayed, nil
}

func uninstallService(name string) error {
	m, err := mgr.Connect()
	if err != nil {
		return fmt.Errorf("connect to the service control manager (run as Administrator): %w", err)
	}
	defer m.Disconnect()
	s, err := m.OpenService(name)
	if err != nil {
		return fmt.Errorf("service %s: %w", name, err)
	}
	defer s.Close()
	if st, err := s.Query(); err == nil && st.State != svc.Stopped {
		if _, err := s.Control(svc.Stop); err == nil {
			for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(300 * time.Millisecond) {
				if st, err := s.Query(); err != nil || st.State == svc.Stopped {
					break
				}
			}
		}
	}
	if err := s.Delete(); err != nil {
		return fmt.Errorf("delete service: %w", err)
	}
	if err := eventlog.Remove(name); err != nil && !errors.Is(err, windows.ERROR_FILE_NOT_FOUND) {
		return fmt.Errorf("remove event log source: %w", err)
	}
	return nil
}

// agentService runs `agent run` under the service control manager.
type agentService struct {
	args []string
	log  *eventlog.Log
}

func runAsService(name string, args []string) int {
	elog, err := eventlog.Open(name)
	if err != nil {
		return 1
	}
	defer elog.Close()
	if err := svc.Run(name, &agentService{args: args, log: elog}); err != nil {
		elog.Error(1, fmt.Sprintf("service %s failed: %v", name, err))
		return 1
	}
	return 0
}

func (a *agentService) Execute(_ []string, req <-chan svc.ChangeRequest, status chan<- svc.Status) (bool, uint32) {
	status <- svc.Status{State: svc.StartPending}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	w := &eventLogWriter{log: a.log}
	done := make(chan int, 1)
	go func() { done <- runRun(ctx, a.args, w, w) }()
	status <- svc.Status{State: svc.Running, Accepts: svc.AcceptStop | svc.AcceptShutdown}
	for {
		select {
		case code := <-done:
			w.Flush()
			// A non-zero exit makes the SCM apply the recovery actions.
			return code != 0, uint32(code)
		case c := <-req:
			switch c.Cmd {
			case svc.Interrogate:
				status <- c.CurrentStatus
			case svc.Stop, svc.Shutdown:
				status <- svc.Status{State: svc.StopPending, WaitHint: 30000}
				cancel()
				code := <-done
				w.Flush()
				return false, uint32(code)
			}
		}
	}
}

// eventLogWriter turns the agent's log lines (slog text) into event log
// entries, by level.
type eventLogWriter struct {
	mu  sync.Mutex
	log *eventlog.Log
	buf bytes.Buffer
}

func (w *eventLogWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.buf.Write(p)
	for {
		line, err := w.buf.ReadString('\n')
		if err != nil {
			w.buf.WriteString(line) // incomplete: keep for the next write
			return len(p), nil
		}
		w.emit(strings.TrimRight(line, "\r\n"))
	}
}

func (w *eventLogWriter) Flush() {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.buf.Len() > 0 {
		w.emit(w.buf.String())
		w.buf.Reset()
	}
}

func (w *eventLogWriter) emit(line string) {
	switch {
	case line == "":
	case strings.Contains(line, "level=ERROR") || strings.HasPrefix(line, "agent run:"):
		w.log.Error(3, line)
	case strings.Contains(line, "level=WARN"):
		w.log.Warning(2, line)
	default:
		w.log.Info(1, line)
	}
}
