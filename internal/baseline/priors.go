package baseline

import (
	"bytes"
	_ "embed"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"
)

// Kind is a probe kind, as internal/probe names it.
type Kind string

// Probe kinds.
const (
	RandomRead  Kind = "random-read"
	RandomWrite Kind = "random-write"
	LogWrite    Kind = "log-write"
)

// Kinds lists the probe kinds that have priors.
func Kinds() []Kind { return []Kind{RandomRead, RandomWrite, LogWrite} }

// Band is an expected latency range in seconds: Low <= Typical <= High.
type Band struct {
	Low, Typical, High float64
}

func (b Band) scale(low, typical, high float64) Band {
	return Band{Low: b.Low * low, Typical: b.Typical * typical, High: b.High * high}
}

// Expectation is what the priors say about one profile and probe kind.
type Expectation struct {
	Profile string // profile key
	Kind    Kind
	// Band is the expected latency, misalignment penalty included.
	Band Band
	// Aligned is the band the same profile would have if aligned.
	Aligned Band
	// Penalty is the predicted latency increase from split I/Os
	// (split_access_share × Split8K): Band = Aligned × (1 + Penalty).
	Penalty float64
	// Sources cite the media band, the RAID factor and the penalty model.
	Sources []string
}

// Priors are the expected bands per media class and RAID level. Build one
// with ParsePriors or DefaultPriors; it is read-only afterwards and safe
// for concurrent use.
type Priors struct {
	media map[Media]mediaPriors
	raid  map[string]raidPriors
}

type mediaPriors struct {
	share       float64
	shareSource string
	bands       map[Kind]Band
	sources     map[Kind]string
}

type raidPriors struct {
	source  string
	factors map[Kind]Band
	sources map[Kind]string
}

//go:embed priors.yaml
var defaultPriors []byte

// DefaultPriors parses the priors shipped with Plumbline (priors.yaml).
func DefaultPriors() (*Priors, error) {
	p, err := ParsePriors(defaultPriors)
	if err != nil {
		return nil, fmt.Errorf("embedded priors.yaml: %w", err)
	}
	return p, nil
}

// ErrInvalidPriors wraps every error ParsePriors returns.
var ErrInvalidPriors = errors.New("invalid priors")

// raidLevels are the RAID levels a priors file may name.
var raidLevels = []string{NoRAID, "linear", "raid0", "raid1", "raid10", "raid5", "raid6", "raid50", "raid60"}

// The file's shape (see the header of priors.yaml).
type priorsFile struct {
	Version int                  `yaml:"version"`
	Media   map[string]mediaFile `yaml:"media"`
	RAID    map[string]raidFile  `yaml:"raid"`
}

type mediaFile struct {
	SplitAccessShare *shareFile `yaml:"split_access_share"`
	RandomRead       *bandFile  `yaml:"random_read"`
	RandomWrite      *bandFile  `yaml:"random_write"`
	LogWrite         *bandFile  `yaml:"log_write"`
}

type shareFile struct {
	Value  *float64 `yaml:"value"`
	Source string   `yaml:"source"`
}

type bandFile struct {
	Low     *duration `yaml:"low"`
	Typical *duration `yaml:"typical"`
	High    *duration `yaml:"high"`
	Source  string    `yaml:"source"`
}

type raidFile struct {
	Source      string      `yaml:"source"`
	RandomRead  *factorFile `yaml:"random_read"`
	RandomWrite *factorFile `yaml:"random_write"`
	LogWrite    *factorFile `yaml:"log_write"`
}

type factorFile struct {
	Low     *float64 `yaml:"low"`
	Typical *float64 `yaml:"typical"`
	High    *float64 `yaml:"high"`
	Source  string   `yaml:"source"`
}

// duration is a Go duration string in the file, seconds in memory. A bare
// number is refused: its unit would be a guess.
type duration float64

func (d *duration) UnmarshalYAML(n *yaml.Node) error {
	if n.Kind != yaml.ScalarNode || n.Tag != "!!str" {
		return fmt.Errorf("line %d: %q: want a duration with a unit (4.2ms, 90us)", n.Line, n.Value)
	}
	v, err := time.ParseDuration(n.Value)
	if err != nil {
		return fmt.Errorf("line %d: %w", n.Line, err)
	}
	*d = duration(v.Seconds())
	return nil
}

// ParsePriors parses and validates a priors file: every media class with
// a split_access_share and a band for each probe kind, RAID levels from
// the known set ("none" required), bands and factors ordered and
// positive, a source on every band, factor and share, no unknown keys.
func ParsePriors(b []byte) (*Priors, error) {
	dec := yaml.NewDecoder(bytes.NewReader(b))
	dec.KnownFields(true)
	var f priorsFile
	if err := dec.Decode(&f); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrInvalidPriors, err)
	}
	var errs []error
	bad := func(format string, args ...any) { errs = append(errs, fmt.Errorf(format, args...)) }
	if f.Version != 1 {
		bad("version %d: want 1", f.Version)
	}
	p := &Priors{media: map[Media]mediaPriors{}, raid: map[string]raidPriors{}}
	for _, name := range sortedKeys(f.Media) {
		mf := f.Media[name]
		m, err := ParseMedia(name)
		if err != nil {
			bad("media: %w", err)
			continue
		}
		mp := mediaPriors{bands: map[Kind]Band{}, sources: map[Kind]string{}}
		switch s := mf.SplitAccessShare; {
		case s == nil || s.Value == nil:
			bad("media.%s.split_access_share: missing value", name)
		case !(*s.Value >= 0 && *s.Value <= 1):
			bad("media.%s.split_access_share: %v: want 0 to 1", name, *s.Value)
		case strings.TrimSpace(s.Source) == "":
			bad("media.%s.split_access_share: missing source", name)
		default:
			mp.share, mp.shareSource = *s.Value, s.Source
		}
		for _, kb := range []struct {
			kind Kind
			b    *bandFile
		}{{RandomRead, mf.RandomRead}, {RandomWrite, mf.RandomWrite}, {LogWrite, mf.LogWrite}} {
			where := fmt.Sprintf("media.%s.%s", name, yamlKind(kb.kind))
			if kb.b == nil {
				bad("%s: missing", where)
				continue
			}
			if kb.b.Low == nil || kb.b.Typical == nil || kb.b.High == nil {
				bad("%s: want low, typical and high", where)
				continue
			}
			band := Band{float64(*kb.b.Low), float64(*kb.b.Typical), float64(*kb.b.High)}
			if err := checkBand(band, 0); err != nil {
				bad("%s: %w", where, err)
				continue
			}
			if strings.TrimSpace(kb.b.Source) == "" {
				bad("%s: missing source", where)
				continue
			}
			mp.bands[kb.kind], mp.sources[kb.kind] = band, kb.b.Source
		}
		p.media[m] = mp
	}
	for _, m := range MediaClasses() {
		if _, ok := f.Media[string(m)]; !ok {
			bad("media.%s: missing", m)
		}
	}
	for _, lvl := range sortedKeys(f.RAID) {
		rf := f.RAID[lvl]
		if !slices.Contains(raidLevels, lvl) {
			bad("raid: level %q: want one of %v", lvl, raidLevels)
			continue
		}
		if strings.TrimSpace(rf.Source) == "" {
			bad("raid.%s: missing source", lvl)
		}
		rp := raidPriors{source: rf.Source, factors: map[Kind]Band{}, sources: map[Kind]string{}}
		for _, kf := range []struct {
			kind Kind
			f    *factorFile
		}{{RandomRead, rf.RandomRead}, {RandomWrite, rf.RandomWrite}, {LogWrite, rf.LogWrite}} {
			where := fmt.Sprintf("raid.%s.%s", lvl, yamlKind(kf.kind))
			if kf.f == nil {
				rp.factors[kf.kind], rp.sources[kf.kind] = Band{1, 1, 1}, rf.Source
				continue
			}
			if kf.f.Low == nil || kf.f.Typical == nil || kf.f.High == nil {
				bad("%s: want low, typical and high", where)
				continue
			}
			band := Band{*kf.f.Low, *kf.f.Typical, *kf.f.High}
			if err := checkBand(band, 1); err != nil {
				bad("%s: %w", where, err)
				continue
			}
			if strings.TrimSpace(kf.f.Source) == "" {
				bad("%s: missing source", where)
				continue
			}
			rp.factors[kf.kind], rp.sources[kf.kind] = band, kf.f.Source
		}
		p.raid[lvl] = rp
	}
	if _, ok := f.RAID[NoRAID]; !ok {
		bad("raid.%s: missing", NoRAID)
	}
	if len(errs) > 0 {
		return nil, fmt.Errorf("%w: %w", ErrInvalidPriors, errors.Join(errs...))
	}
	return p, nil
}

// checkBand wants 0 < low <= typical <= high, all finite, and typical >=
// minTypical when minTypical > 0 (RAID factors never make a volume faster).
func checkBand(b Band, minTypical float64) error {
	for _, v := range []float64{b.Low, b.Typical, b.High} {
		if !(v > 0) || math.IsInf(v, 0) {
			return fmt.Errorf("%v: want positive finite values", v)
		}
	}
	if !(b.Low <= b.Typical && b.Typical <= b.High) {
		return fmt.Errorf("low %v, typical %v, high %v: want low <= typical <= high", b.Low, b.Typical, b.High)
	}
	if b.Typical < minTypical {
		return fmt.Errorf("typical %v: want at least %v", b.Typical, minTypical)
	}
	return nil
}

func yamlKind(k Kind) string { return strings.ReplaceAll(string(k), "-", "_") }

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

// ErrNoPrior is returned by Expect for a kind or media class the priors
// do not cover.
var ErrNoPrior = errors.New("no prior")

// Penalty is the split-I/O model: the predicted latency increase of a
// volume of media class m whose 8 KiB I/Os split with probability split.
func (p *Priors) Penalty(m Media, split float64) float64 {
	if !(split > 0) {
		return 0
	}
	return p.media[m].share * math.Min(split, 1)
}

// Expect is the expected band for a profile and probe kind: the media
// band × the RAID level's factor × (1 + Penalty) for the random kinds.
// A RAID level the file does not list is priced as "none" (and the
// sources say so). Log writes carry no penalty (DESIGN.md: offset makes no
// difference to sequential log writes).
func (p *Priors) Expect(prof Profile, kind Kind) (Expectation, error) {
	media := prof.Media
	if media == "" {
		media = UnknownMedia
	}
	mp, ok := p.media[media]
	if !ok {
		return Expectation{}, fmt.Errorf("%w for media class %q", ErrNoPrior, media)
	}
	band, ok := mp.bands[kind]
	if !ok {
		return Expectation{}, fmt.Errorf("%w for probe kind %q", ErrNoPrior, kind)
	}
	e := Expectation{Profile: prof.Key(), Kind: kind}
	e.Sources = append(e.Sources, fmt.Sprintf("%s %s: %s", media, kind, mp.sources[kind]))
	lvl := strings.ToLower(prof.RAIDLevel)
	if lvl == "" {
		lvl = NoRAID
	}
	rp, ok := p.raid[lvl]
	if !ok {
		rp = p.raid[NoRAID]
		e.Sources = append(e.Sources, fmt.Sprintf("raid level %q has no prior: priced as %s", lvl, NoRAID))
	}
	f := rp.factors[kind]
	e.Aligned = band.scale(f.Low, f.Typical, f.High)
	e.Sources = append(e.Sources, fmt.Sprintf("%s %s ×%g: %s", lvl, kind, f.Typical, rp.sources[kind]))
	if kind != LogWrite {
		e.Penalty = p.Penalty(media, prof.Split8K)
	}
	if e.Penalty > 0 {
		e.Sources = append(e.Sources, fmt.Sprintf("misalignment: %.3g split × %.2g access share = +%.1f%%: %s",
			prof.Split8K, mp.share, e.Penalty*100, mp.shareSource))
	}
	k := 1 + e.Penalty
	e.Band = e.Aligned.scale(k, k, k)
	return e, nil
}
