import { readFileSync } from 'node:fs';
import { Ajv2020 } from 'ajv/dist/2020.js';
import { describe, expect, it } from 'vitest';
import type { AmfEvent, AuthContext } from '../../src/events/cloudEvent.js';
import {
  AGENT_ROLES,
  AMF_EVENT_TYPES,
  DATA_SCHEMA_URI,
  SCHEMA_VERSION,
  VISIBILITIES,
} from '../../src/events/eventTypes.js';
import { AGENT_RECORD_SCHEMA, EVENT_ENVELOPE_SCHEMA } from '../../src/events/schemas.js';

function published(file: string): unknown {
  return JSON.parse(readFileSync(new URL(`../../schemas/${file}`, import.meta.url), 'utf8'));
}

describe('published schema files', () => {
  it('schemas/event-envelope-1.1.0.json equals EVENT_ENVELOPE_SCHEMA', () => {
    expect(published('event-envelope-1.1.0.json')).toStrictEqual(EVENT_ENVELOPE_SCHEMA);
  });

  it('schemas/agent-record-1.1.0.json equals AGENT_RECORD_SCHEMA', () => {
    expect(published('agent-record-1.1.0.json')).toStrictEqual(AGENT_RECORD_SCHEMA);
  });

  it.each([
    ['event-envelope-1.1.0.json', 'https://amf.spec/schemas/event-envelope/1.1.0'],
    ['agent-record-1.1.0.json', 'https://amf.spec/schemas/agent-record/1.1.0'],
  ])('%s is a valid JSON Schema 2020-12 document with $id %s', (file, id) => {
    const schema = published(file) as { $id: string };
    expect(schema.$id).toBe(id);
    const ajv = new Ajv2020({ strict: false });
    expect(ajv.validateSchema(schema), JSON.stringify(ajv.errors)).toBe(true);
  });

  it('the exported schemas are frozen, so no importer can change them for the others', () => {
    expect(Object.isFrozen(EVENT_ENVELOPE_SCHEMA)).toBe(true);
    expect(Object.isFrozen(EVENT_ENVELOPE_SCHEMA.properties.data.properties.auth_context.required)).toBe(
      true,
    );
    expect(Object.isFrozen(AGENT_RECORD_SCHEMA.properties.status)).toBe(true);
  });
});

describe('the envelope schema agrees with the TypeScript side', () => {
  it('$id is the dataschema createEvent writes, for SCHEMA_VERSION', () => {
    expect(EVENT_ENVELOPE_SCHEMA.$id).toBe(DATA_SCHEMA_URI);
    expect(DATA_SCHEMA_URI.endsWith(`/${SCHEMA_VERSION}`)).toBe(true);
  });

  it('type, role and visibility enums are the eventTypes constants', () => {
    expect([...EVENT_ENVELOPE_SCHEMA.properties.type.enum]).toEqual([...AMF_EVENT_TYPES]);
    expect([...EVENT_ENVELOPE_SCHEMA.properties.amfagentrole.enum]).toEqual([...AGENT_ROLES]);
    expect([...EVENT_ENVELOPE_SCHEMA.properties.amfvisibility.enum]).toEqual([...VISIBILITIES]);
  });

  it('AmfEvent names exactly the schema attributes (data_base64 is declared only to be refused)', () => {
    const keys: Record<keyof AmfEvent, true> = {
      specversion: true,
      id: true,
      source: true,
      type: true,
      time: true,
      datacontenttype: true,
      dataschema: true,
      subject: true,
      amftraceid: true,
      amfparentid: true,
      amftaskid: true,
      amfagentrole: true,
      amfvisibility: true,
      amfconfidence: true,
      amfttl: true,
      amfschemaversion: true,
      amftrustdomain: true,
      data: true,
    };
    const schemaKeys = Object.keys(EVENT_ENVELOPE_SCHEMA.properties).filter((key) => key !== 'data_base64');
    expect(Object.keys(keys).sort()).toEqual(schemaKeys.sort());
  });

  it('AuthContext names exactly the auth_context properties', () => {
    const keys: Record<keyof AuthContext, true> = {
      identity: true,
      trust_domain: true,
      scopes: true,
      granted_by: true,
      delegation_chain: true,
      issued_at: true,
      expires_at: true,
      svid_verified: true,
    };
    const auth = EVENT_ENVELOPE_SCHEMA.properties.data.properties.auth_context;
    expect(Object.keys(keys).sort()).toEqual(Object.keys(auth.properties).sort());
  });
});
