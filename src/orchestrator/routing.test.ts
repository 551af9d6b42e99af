import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import type { FleetMember } from './fleet.js';
import { missingCapability } from './routing.js';

const none = { jobTypes: [], capabilities: [] };

function member(jobTypes: string[], capabilities: string[]): FleetMember {
  return { worker: `w-${jobTypes.join('-')}-${capabilities.join('-')}`, jobTypes, capabilities, slots: 1, running: 0, lastHeartbeat: 0 };
}

describe('routing', () => {
  it('judges nothing while the fleet is empty and nothing is declared', () => {
    assert.equal(missingCapability({ type: 'render', requires: ['gpu'] }, [], none), undefined);
  });

  it('routes a job to a member offering its type and every capability it requires', () => {
    const fleet = [member(['render'], ['gpu', 'ffmpeg'])];
    assert.equal(missingCapability({ type: 'render', requires: ['gpu'] }, fleet, none), undefined);
  });

  it('names the job type no member offers', () => {
    const fleet = [member(['sleep'], [])];
    assert.equal(missingCapability({ type: 'render', requires: [] }, fleet, none), 'no worker of the fleet offers job type "render"');
  });

  it('names the capability no member offering the type has', () => {
    const fleet = [member(['render'], ['ffmpeg']), member(['sleep'], ['gpu'])];
    assert.match(missingCapability({ type: 'render', requires: ['gpu', 'ffmpeg'] }, fleet, none)!, /missing "gpu"$/);
  });

  it('needs one member with all the capabilities, not the union of several', () => {
    const fleet = [member(['render'], ['gpu']), member(['render'], ['ffmpeg'])];
    assert.match(missingCapability({ type: 'render', requires: ['gpu', 'ffmpeg'] }, fleet, none)!, /missing "gpu", "ffmpeg"$/);
  });

  it('names the capabilities a type lacks on every worker that has it but holds it back', () => {
    const holds = (capabilities: string[], missing: string[]): FleetMember => ({
      ...member(['sleep'], capabilities),
      heldBack: [{ type: 'thumbnail', missing }],
    });
    assert.equal(
      missingCapability({ type: 'thumbnail', requires: [] }, [holds([], ['imagemagick'])], none),
      'no worker of the fleet offers job type "thumbnail": the workers that have it lack capabilities it requires: missing "imagemagick"',
    );
    // What they all lack; when each lacks another one, every one of them.
    const lackingGpu = [holds(['imagemagick'], ['gpu']), holds([], ['imagemagick', 'gpu'])];
    assert.match(missingCapability({ type: 'thumbnail', requires: [] }, lackingGpu, none)!, /missing "gpu"$/);
    const lackingEither = [holds(['imagemagick'], ['gpu']), holds(['gpu'], ['imagemagick'])];
    assert.match(missingCapability({ type: 'thumbnail', requires: [] }, lackingEither, none)!, /missing "gpu", "imagemagick"$/);
    // A worker that offers the type routes it, whatever another holds back.
    const offering = [holds([], ['imagemagick']), member(['thumbnail'], ['imagemagick'])];
    assert.equal(missingCapability({ type: 'thumbnail', requires: [] }, offering, none), undefined);
  });

  it('counts what configuration declares even when no worker is heard from', () => {
    const declared = { jobTypes: ['render'], capabilities: ['gpu'] };
    assert.equal(missingCapability({ type: 'render', requires: ['gpu'] }, [], declared), undefined);
    assert.match(missingCapability({ type: 'transcode', requires: [] }, [], declared)!, /job type "transcode"/);
  });
});
