// Package config loads and validates the agent's YAML configuration file.
// Unknown keys are errors, defaults are filled in at load, and every value
// is validated before the agent acts on it.
package config

import (
	"errors"
	"fmt"
	"os"
	"path"
	"path/filepath"
	"strings"

	"github.com/plumbline/plumbline/internal/agent/geometry"
	"github.com/plumbline/plumbline/internal/agentkeys"
	"github.com/plumbline/plumbline/internal/maintenance"
	"github.com/plumbline/plumbline/internal/mounts"
	"github.com/plumbline/plumbline/internal/strictyaml"
)

// Agent is the agent's configuration file.
type Agent struct {
	// DeclaredDevices describe hardware RAID the OS cannot see.
	DeclaredDevices []DeclaredDevice `yaml:"declared_devices,omitempty"`
	// Include and Exclude select the volumes to inspect. By default every
	// mounted file system backed by a block device is inspected.
	Include Selector `yaml:"include,omitempty"`
	Exclude Selector `yaml:"exclude,omitempty"`
	// ReadSuperblocks allows one read-only 4 KiB read of each mounted file
	// system's superblock, for ext4 stride/stripe_width and XFS sunit/swidth.
	ReadSuperblocks bool `yaml:"read_superblocks,omitempty"`
	// LVMBackupDir holds LVM's metadata backups, the source of pe_start.
	LVMBackupDir string `yaml:"lvm_backup_dir,omitempty"`

	// The keys below are for `agent run` (run.go); `agent inspect` ignores them.

	// AgentID is the identity the agent reports as; empty: the client
	// certificate's common name.
	AgentID   string          `yaml:"agent_id,omitempty"`
	Server    Server          `yaml:"server,omitempty"`
	Spool     Spool           `yaml:"spool,omitempty"`
	Intervals Intervals       `yaml:"intervals,omitempty"`
	Probes    []ProbeSchedule `yaml:"probes,omitempty"`
	Web       Web             `yaml:"web,omitempty"`
	// Labels describe the host to central policy, whose entries select
	// hosts by them (sent in Hello).
	Labels map[string]string `yaml:"labels,omitempty"`
	// MaintenanceWindows are periods in which no probe starts and a
	// running probe stops; the central policy's windows apply as well.
	MaintenanceWindows []maintenance.Window `yaml:"maintenance_windows,omitempty"`
	// Databases are the databases whose own I/O statistics the agent
	// reads (docs/agent.md, "Database I/O"); none by default.
	Databases []DatabaseSource `yaml:"databases,omitempty"`

	// OverrideFiles are YAML files read after this one, in order, whose
	// keys replace this file's (a list is replaced whole); relative names
	// are relative to this file's directory. `server --dev` writes
	// agent.yaml at every start and points it at agent.local.yaml, which
	// it never rewrites: the place for a developer's own keys.
	OverrideFiles []string `yaml:"override_files,omitempty"`
}

// Selector matches volumes by mount point glob (path.Match syntax) and by
// file-system type.
type Selector struct {
	MountPoints []string `yaml:"mount_points,omitempty"`
	FSTypes     []string `yaml:"fs_types,omitempty"`
}

// Default is the configuration used when no file is given.
func Default() Agent {
	d := geometry.DefaultOptions()
	return Agent{
		ReadSuperblocks: d.ReadSuperblocks,
		LVMBackupDir:    d.LVMBackupDir,
		Spool:           Spool{MaxBytes: DefaultSpoolMaxBytes},
		Intervals:       Intervals{GeometryRefresh: DefaultGeometryRefresh, Report: DefaultReportInterval, MemberIO: DefaultMemberIOInterval},
	}
}

// ErrInvalid wraps every validation error.
var ErrInvalid = errors.New("invalid configuration")

// Load reads and validates a configuration file and its override_files.
func Load(file string) (Agent, error) {
	a, lines, err := decodeFile(file)
	if err == nil {
		err = strictyaml.WithLines(a.Validate(), lines)
	}
	if err != nil {
		return Agent{}, fmt.Errorf("%s: %w", file, err)
	}
	return a, nil
}

// Parse decodes and validates configuration bytes.
func Parse(b []byte) (Agent, error) {
	a, err := decode(b)
	if err != nil {
		return Agent{}, err
	}
	if err := a.Validate(); err != nil {
		return Agent{}, strictyaml.WithLines(err, strictyaml.Lines(b))
	}
	return a, nil
}

// LoadRun reads a configuration file for `agent run`: Load's checks and
// ValidateRun's, all errors reported together.
func LoadRun(file string) (Agent, error) {
	a, lines, err := decodeFile(file)
	if err == nil {
		err = strictyaml.WithLines(a.ValidateRun(), lines)
	}
	if err != nil {
		return Agent{}, fmt.Errorf("%s: %w", file, err)
	}
	return a, nil
}

// decode decodes configuration bytes over the defaults. override_files
// are not read (there is no file to resolve them against): decodeFile.
func decode(b []byte) (Agent, error) {
	// Decoding into the defaults keeps them for omitted keys.
	a := Default()
	if err := strictyaml.Decode(b, &a); err != nil {
		return Agent{}, fmt.Errorf("%w: %w", ErrInvalid, err)
	}
	a.applyDefaults()
	return a, nil
}

// decodeFile decodes file over the defaults, then each of its
// override_files over the result, in order: a key an override file sets
// replaces the value before it (a list such as declared_devices or probes
// is replaced whole). Relative names are relative to file's directory. An
// override file cannot name more override files. lines are the file's key
// paths' lines when it has no override files (with them, a value's line
// could be in either file), for the validation errors.
func decodeFile(file string) (a Agent, lines map[string]int, err error) {
	b, err := os.ReadFile(file)
	if err != nil {
		return Agent{}, nil, fmt.Errorf("read config: %w", err)
	}
	a = Default()
	if err := strictyaml.Decode(b, &a); err != nil {
		return Agent{}, nil, fmt.Errorf("%w: %w", ErrInvalid, err)
	}
	overrides := a.OverrideFiles
	for i, o := range overrides {
		p := o
		if !filepath.IsAbs(p) {
			p = filepath.Join(filepath.Dir(file), p)
		}
		ob, err := os.ReadFile(p)
		if err != nil {
			return Agent{}, nil, fmt.Errorf("%w: override_files[%d]: %w", ErrInvalid, i, err)
		}
		a.OverrideFiles = nil
		if err := strictyaml.Decode(ob, &a); err != nil {
			return Agent{}, nil, fmt.Errorf("%w: override file %s: %w", ErrInvalid, p, err)
		}
		if len(a.OverrideFiles) > 0 {
			return Agent{}, nil, fmt.Errorf("%w: override file %s: override_files: an override file cannot name more (list them all in %s)", ErrInvalid, p, file)
		}
	}
	a.OverrideFiles = overrides
	a.applyDefaults()
	if len(overrides) == 0 {
		lines = strictyaml.Lines(b)
	}
	return a, lines, nil
}

// Validate checks every value and says which one is wrong.
func (a Agent) Validate() error {
	errs := agentkeys.ValidateDeclared(a.DeclaredDevices)
	for _, s := range []struct {
		name string
		sel  Selector
	}{{"include", a.Include}, {"exclude", a.Exclude}} {
		for i, g := range s.sel.MountPoints {
			if !mounts.ValidGlob(g) {
				errs = append(errs, fmt.Errorf("%s.mount_points[%d] %q: want an absolute path or glob (path.Match syntax; on Windows D:/ or D:/SQL*/)", s.name, i, g))
			}
		}
		for i, t := range s.sel.FSTypes {
			if t == "" || strings.ContainsAny(t, " \t/") {
				errs = append(errs, fmt.Errorf("%s.fs_types[%d] %q: want a file-system type such as xfs or ext4", s.name, i, t))
			}
		}
	}
	if a.LVMBackupDir != "" && !path.IsAbs(a.LVMBackupDir) {
		errs = append(errs, fmt.Errorf("lvm_backup_dir %q: want an absolute path", a.LVMBackupDir))
	}
	errs = append(errs, a.validateRun()...)
	if len(errs) > 0 {
		return fmt.Errorf("%w: %w", ErrInvalid, errors.Join(errs...))
	}
	return nil
}

// GeometryOptions applies the configuration to discovery options whose
// roots the caller has already set.
func (a Agent) GeometryOptions(base geometry.Options) geometry.Options {
	o := base
	o.ReadSuperblocks = a.ReadSuperblocks
	if a.LVMBackupDir != "" {
		o.LVMBackupDir = a.LVMBackupDir
	}
	o.IncludeMountPoints = a.Include.MountPoints
	o.IncludeFSTypes = a.Include.FSTypes
	o.ExcludeMountPoints = a.Exclude.MountPoints
	o.ExcludeFSTypes = a.Exclude.FSTypes
	o.Declared = nil
	for _, d := range a.DeclaredDevices {
		o.Declared = append(o.Declared, geometry.DeclaredDevice{
			Device: d.Device, Serial: d.Serial, Model: d.Model,
			RAID: geometry.DeclaredRAID{Level: d.RAID.Level, StripeUnit: d.RAID.StripeUnit, Disks: d.RAID.Disks, Spans: d.RAID.Spans},
		})
	}
	return o
}
