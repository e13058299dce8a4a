/**
 * The slicer-metadata parser (protocol/slicer-metadata), pure: golden results
 * for texts shaped as Bambu Studio, OrcaSlicer and PrusaSlicer write them
 * (slice_info.config and 3dmodel.model from bbs_3mf.cpp, G-code headers and
 * footers from GCode.cpp / GCodeProcessor.cpp, each built here as text), and
 * hostile input that gives a SlicerMetadataError or a sane result, never
 * anything else, in bounded time.
 */
import t, { type Test } from 'tap'
import { readGcodeMetadata, readThreeMfMetadata, SlicerMetadataError, type SlicerMetadata, type ThreeMfSources } from '../../protocol/slicer-metadata/index.js'

// ---------------------------------------------------------------- fixtures

/** Bambu Studio 01.09: one sliced plate of a P1S, an AMS slot listed at 0 g, a warning. */
const bambuSliceInfo = `<?xml version="1.0" encoding="UTF-8"?>
<config>
  <header>
    <header_item key="X-BBL-Client-Type" value="slicer"/>
    <header_item key="X-BBL-Client-Version" value="01.09.00.70"/>
  </header>
  <plate>
    <metadata key="index" value="1"/>
    <metadata key="printer_model_id" value="C12"/>
    <metadata key="nozzle_diameters" value="0.4"/>
    <metadata key="timelapse_type" value="0"/>
    <metadata key="prediction" value="3723"/>
    <metadata key="weight" value="11.66"/>
    <metadata key="outside" value="false"/>
    <metadata key="support_used" value="false"/>
    <metadata key="label_object_enabled" value="true"/>
    <object identify_id="139" name="3DBenchy.stl" skipped="false" />
    <filament id="1" tray_info_idx="GFA00" type="PLA" color="#FFFFFF" used_m="3.91" used_g="11.66" />
    <filament id="2" tray_info_idx="GFG00" type="PETG" color="#F72323" used_m="0.00" used_g="0.00" />
    <warning msg="bed_temperature_too_high_than_filament" level="1" error_code ="1000C001"  />
  </plate>
</config>
`

const bambuSettings = JSON.stringify({
  version: '01.09.00.70',
  name: 'project_settings',
  from: 'project',
  curr_bed_type: 'Textured PEI Plate',
  filament_colour: ['#FFFFFF', '#F72323'],
  filament_type: ['PLA', 'PETG'],
  layer_height: '0.2',
  nozzle_diameter: ['0.4'],
  printer_model: 'Bambu Lab P1S',
  printer_settings_id: 'Bambu Lab P1S 0.4 nozzle',
  printer_variant: '0.4',
})

/** The first bytes of 3D/3dmodel.model: metadata in std::map order, cut in the middle of a tag. */
const modelHead = (application: string): string => `<?xml version="1.0" encoding="UTF-8"?>
<model unit="millimeter" xml:lang="en-US" xmlns="http://schemas.microsoft.com/3dmanufacturing/core/2015/02" xmlns:BambuStudio="http://schemas.bambulab.com/package/2021" xmlns:p="http://schemas.microsoft.com/3dmanufacturing/production/2015/06" requiredextensions="p">
 <metadata name="Application">${application}</metadata>
 <metadata name="BambuStudio:3mfVersion">1</metadata>
 <metadata name="Copyright"></metadata>
 <metadata name="CreationDate">2024-05-02</metadata>
 <metadata name="Description"></metadata>
 <metadata name="Designer"></metadata>
 <metadata name="Title">3DBenchy</metadata>
 <resources>
  <object id="2" p:UUID="00000001-61cb-4c03-9d28-80fed5dfa1dc" type="model">
   <components>
    <component p:path="/3D/Objects/object_1.model" objectid="1" p:UUID="00010000-b206-40ff-9872-83e8017abed1" transfo`

/** The head of Metadata/plate_1.gcode as Bambu Studio writes it: header block, then the config block. */
const bambuPlateHead = `; HEADER_BLOCK_START
; BambuStudio 01.09.00.70
; model printing time: 58m 10s; total estimated time: 1h 2m 3s
; total layer number: 240
; total filament length [mm] : 3910.00
; total filament volume [cm^3] : 9404.43
; total filament weight [g] : 11.66
; filament_density: 1.24,1.27
; filament_diameter: 1.75,1.75
; max_z_height: 48.00
; HEADER_BLOCK_END

; CONFIG_BLOCK_START
; accel_to_decel_enable = 0
; curr_bed_type = Textured PEI Plate
; filament_colour = #FFFFFF;#F72323
; filament_settings_id = "Bambu PLA Basic @BBL P1S";"Generic PETG"
; filament_type = PLA;PETG
; nozzle_diameter = 0.4
; printer_model = Bambu Lab P1S
; printer_settings_id = Bambu Lab P1S 0.4 nozzle
; CONFIG_BLOCK_END

; EXECUTABLE_BLOCK_START
M73 P0 R62
M201 X20000 Y20000 Z500 E5000
`

/** OrcaSlicer 2.3: X-BBL-Client-Version left empty, two sliced plates, a colour with alpha. */
const orcaSliceInfo = `<?xml version="1.0" encoding="UTF-8"?>
<config>
  <header>
    <header_item key="X-BBL-Client-Type" value="slicer"/>
    <header_item key="X-BBL-Client-Version" value=""/>
  </header>
  <plate>
    <metadata key="index" value="1"/>
    <metadata key="extruder_type" value="0"/>
    <metadata key="nozzle_volume_type" value="0"/>
    <metadata key="printer_model_id" value="BL-P001"/>
    <metadata key="nozzle_diameters" value="0.4"/>
    <metadata key="timelapse_type" value="0"/>
    <metadata key="prediction" value="5421"/>
    <metadata key="weight" value="21.37"/>
    <metadata key="first_layer_time" value="92.416267"/>
    <metadata key="outside" value="false"/>
    <metadata key="support_used" value="false"/>
    <metadata key="label_object_enabled" value="true"/>
    <metadata key="filament_maps" value="1 1"/>
    <object identify_id="362" name="gear_housing" skipped="false" />
    <filament id="1" tray_info_idx="GFL99" type="PLA" color="#00AE42" used_m="7.12" used_g="21.37" />
    <layer_filament_lists>
      <layer_filament_list filament_list="0" layer_ranges="0 159" />
    </layer_filament_lists>
  </plate>
  <plate>
    <metadata key="index" value="2"/>
    <metadata key="printer_model_id" value="BL-P001"/>
    <metadata key="nozzle_diameters" value="0.4"/>
    <metadata key="prediction" value="1876"/>
    <metadata key="weight" value="6.25"/>
    <object identify_id="401" name="gear_lid" skipped="false" />
    <filament id="2" tray_info_idx="GFG99" type="PETG" color="#1a1a1a80" used_m="1.98" used_g="6.25" />
  </plate>
</config>
`

const orcaSettings = JSON.stringify({
  version: '2.3.1',
  name: 'project_settings',
  from: 'project',
  curr_bed_type: 'High Temp Plate',
  nozzle_diameter: ['0.4'],
  printer_model: 'Bambu Lab X1 Carbon',
  printer_settings_id: 'Bambu Lab X1 Carbon 0.4 nozzle',
})

const orcaPlateHead = (plate: number, time: string): string => `; HEADER_BLOCK_START
; generated by OrcaSlicer 2.3.1 on 2025-06-01 at 10:0${plate}:00
; model printing time: 1h 0m 0s; total estimated time: ${time}
; total layer number: 160
; filament_density: 1.26,1.27
; filament_diameter: 1.75,1.75
; max_z_height: 32.00
; HEADER_BLOCK_END

; external perimeters extrusion width = 0.42mm
M73 P0 R90
`

/** PrusaSlicer 2.7 for an MK4: the header, a thumbnail, moves cut mid-line at 64 KiB. */
const prusaHead = `; generated by PrusaSlicer 2.7.1+linux-x64-GTK3 on 2024-01-10 at 10:00:00 UTC

; 

; thumbnail begin 16x16 148
; iVBORw0KGgoAAAANSUhEUgAAABAAAAAQCAYAAAAf8/9hAAAAW0lEQVR4AWNgGAWjYBSMglEwCkbBKBgFo2AU
; jAIAQZ0AAa0MwU4AAAAASUVORK5CYII=
; thumbnail end
; 

; external perimeters extrusion width = 0.45mm
; perimeters extrusion width = 0.45mm
; first layer extrusion width = 0.50mm

M73 P0 R62
M201 X4000 Y4000 Z200 E2500 ; sets maximum accelerations, mm/sec^2
G28 W ; home all without mesh bed level
G1 X10.5 Y12.25 E`

/** Its last 64 KiB, which start in the middle of a move. */
const prusaTail = ` X120.5 Y80.2 E.0321
G1 X121 Y81 E.02
M107
;TYPE:Custom
; Filament-specific end gcode
M104 S0 ; turn off temperature
M140 S0 ; turn off heatbed
M84 X Y E ; disable motors
M73 P100 R0
; objects_info = {"objects":[{"name":"shape-box","polygon":[[100,100],[120,100],[120,120],[100,120]]}]}
; filament used [mm] = 1234.56
; filament used [cm3] = 2.97
; filament used [g] = 3.69
; filament cost = 0.09
; total filament used [g] = 3.69
; total filament cost = 0.09
; total filament used for wipe tower [g] = 0.00
; estimated printing time (normal mode) = 1h 2m 3s
; estimated first layer printing time (normal mode) = 1m 12s

; prusaslicer_config = begin
; bed_shape = 0x-4,250x-4,250x210,0x210
; bed_temperature = 85
; filament_colour = #FF8000
; filament_settings_id = "Prusament PETG @PG"
; filament_type = PETG
; nozzle_diameter = 0.4
; printer_model = MK4
; printer_notes = Do not remove the keywords below.\\nPRINTER_VENDOR_PRUSA3D\\nPRINTER_MODEL_MK4\\n
; printer_settings_id = Original Prusa MK4 Input Shaper 0.4 nozzle
; start_gcode = M17 ; enable steppers\\nM862.1 P[nozzle_diameter] ; nozzle check\\nG28 ; home all without mesh bed level
; prusaslicer_config = end
`

/** OrcaSlicer 2.1 for a Voron: header block on top, statistics and config block at the end. */
const orcaHead = `; HEADER_BLOCK_START
; generated by OrcaSlicer 2.1.1 on 2024-05-01 at 09:00:00
; total layer number: 120
; filament_density: 1.27
; filament_diameter: 1.75
; max_z_height: 24.00
; HEADER_BLOCK_END

; external perimeters extrusion width = 0.42mm
PRINT_START EXTRUDER=240 BED=80
G1 X100 Y100 F12000
`

const orcaTail = `5 E.0211
; EXECUTABLE_BLOCK_END
; filament used [mm] = 4512.30
; filament used [cm3] = 10.85
; filament used [g] = 13.46
; filament cost = 0.27
; total filament used [g] = 13.46
; total filament cost = 0.27
; total layers count = 120
; estimated printing time (normal mode) = 2h 15m 40s
; estimated first layer printing time (normal mode) = 2m 5s

; CONFIG_BLOCK_START
; curr_bed_type = Textured PEI Plate
; filament_colour = #2850E0
; filament_settings_id = "Generic PETG @System"
; filament_type = PETG
; nozzle_diameter = 0.4
; printer_model = Voron 2.4 350
; printer_settings_id = Voron 2.4 350 0.4 nozzle
; CONFIG_BLOCK_END
`

const crlf = (text: string): string => text.replace(/\n/g, '\r\n')

function failure(read: () => unknown): string {
  try {
    read()
  } catch (error) {
    if (error instanceof SlicerMetadataError) return error.message
    throw error
  }
  return 'no error'
}

// ---------------------------------------------------------------- 3MF

t.test('slicer metadata - a Bambu Studio P1S project: one plate, the slot at 0 g left out', async (t) => {
  const result = readThreeMfMetadata({
    sliceInfo: bambuSliceInfo,
    projectSettings: bambuSettings,
    modelHead: modelHead('BambuStudio-01.09.00.70'),
    plateGcodeHeads: new Map([[1, bambuPlateHead]]),
  })
  const white = { id: '1', type: 'PLA', color_hex: '#FFFFFF', color_rgba: 'FFFFFFFF', used_m: 3.91, used_g: 11.66 }
  t.same(result, {
    metadata: {
      slicer: 'BambuStudio',
      slicer_version: '01.09.00.70',
      printer_model: 'Bambu Lab P1S',
      printer_model_id: 'C12',
      nozzle_diameter: 0.4,
      bed_type: 'Textured PEI Plate',
      estimated_seconds: 3723,
      weight_g: 11.66,
      plates: [{ index: 1, estimated_seconds: 3723, weight_g: 11.66, filaments: [white] }],
    },
    project_filaments: [white],
    activePlateNumber: 1,
  } satisfies SlicerMetadata)
  t.notOk('nozzle_diameters' in result.metadata, 'one nozzle: no list of them')
})

t.test('slicer metadata - an OrcaSlicer project with two sliced plates: the first is active, the plate G-code names the slicer', async (t) => {
  const result = readThreeMfMetadata({
    sliceInfo: orcaSliceInfo,
    projectSettings: orcaSettings,
    modelHead: modelHead('BambuStudio-2.3.1'),
    plateGcodeHeads: new Map([
      [2, orcaPlateHead(2, '32m 0s')],
      [1, orcaPlateHead(1, '1h 30m 21s')],
    ]),
  })
  const green = { id: '1', type: 'PLA', color_hex: '#00AE42', color_rgba: '00AE42FF', used_m: 7.12, used_g: 21.37 }
  const grey = { id: '2', type: 'PETG', color_hex: '#1A1A1A', color_rgba: '1A1A1A80', used_m: 1.98, used_g: 6.25 }
  t.same(result, {
    metadata: {
      slicer: 'OrcaSlicer',
      slicer_version: '2.3.1',
      printer_model: 'Bambu Lab X1 Carbon',
      printer_model_id: 'BL-P001',
      nozzle_diameter: 0.4,
      bed_type: 'High Temp Plate',
      estimated_seconds: 5421,
      weight_g: 21.37,
      plates: [
        { index: 1, estimated_seconds: 5421, weight_g: 21.37, filaments: [green] },
        { index: 2, estimated_seconds: 1876, weight_g: 6.25, filaments: [grey] },
      ],
    },
    project_filaments: [green],
    activePlateNumber: 1,
  } satisfies SlicerMetadata)
})

t.test('slicer metadata - the application header: OrcaSlicer behind "BambuStudio-" with a three-part version, its own name, or slice_info alone', async (t) => {
  const slicer = (sources: ThreeMfSources): [string | null, string | null] => {
    const { metadata } = readThreeMfMetadata(sources)
    return [metadata.slicer, metadata.slicer_version]
  }
  t.same(slicer({ sliceInfo: orcaSliceInfo, modelHead: modelHead('BambuStudio-2.3.1') }), ['OrcaSlicer', '2.3.1'], 'OrcaSlicer writes BambuStudio-<its own version>')
  t.same(slicer({ modelHead: modelHead('OrcaSlicer-2.1.1') }), ['OrcaSlicer', '2.1.1'])
  t.same(slicer({ modelHead: modelHead('BambuStudio-02.00.03.54') }), ['BambuStudio', '02.00.03.54'])
  t.same(slicer({ sliceInfo: bambuSliceInfo }), ['BambuStudio', '01.09.00.70'], "without a model head, Bambu Studio's client version")
  t.same(slicer({ sliceInfo: orcaSliceInfo }), [null, null], 'an empty client version names nobody')
  t.same(slicer({ modelHead: '<?xml version="1.0"?>\n<model unit="millimeter">\n <resources>' }), [null, null], 'a model without the item')
})

t.test('slicer metadata - a plate without a prediction takes its G-code total; without a weight, the sum of its filaments', async (t) => {
  const info = `<config><plate><metadata key="index" value="3"/><metadata key="prediction" value=""/><metadata key="weight" value=""/>
    <filament id="1" type="PLA" color="#FFFFFF" used_m="1.00" used_g="3.00"/><filament id="4" type="PLA" color="#000000" used_m="0.50" used_g="1.25"/></plate></config>`
  const result = readThreeMfMetadata({ sliceInfo: info, plateGcodeHeads: new Map([[3, bambuPlateHead]]) })
  t.same(result.metadata.plates, [
    {
      index: 3,
      estimated_seconds: 3723,
      weight_g: 4.25,
      filaments: [
        { id: '1', type: 'PLA', color_hex: '#FFFFFF', color_rgba: 'FFFFFFFF', used_m: 1, used_g: 3 },
        { id: '4', type: 'PLA', color_hex: '#000000', color_rgba: '000000FF', used_m: 0.5, used_g: 1.25 },
      ],
    },
  ])
  t.equal(result.activePlateNumber, 3, 'only plate 3 was sliced: it is the active one')
  t.match(result.metadata, { slicer: 'BambuStudio', printer_model: 'Bambu Lab P1S', bed_type: 'Textured PEI Plate', nozzle_diameter: 0.4 }, 'what the settings would say, from the plate G-code config block')
})

t.test('slicer metadata - an unsliced project: no plates, no filaments, what its settings say', async (t) => {
  const expected: SlicerMetadata = {
    metadata: {
      slicer: 'BambuStudio',
      slicer_version: '01.09.00.70',
      printer_model: 'Bambu Lab P1S',
      printer_model_id: null,
      nozzle_diameter: 0.4,
      bed_type: 'Textured PEI Plate',
      estimated_seconds: null,
      weight_g: null,
      plates: [],
    },
    project_filaments: [],
    activePlateNumber: null,
  }
  t.same(readThreeMfMetadata({ projectSettings: bambuSettings, modelHead: modelHead('BambuStudio-01.09.00.70') }), expected, 'no slice_info')
  const headerOnly = '<?xml version="1.0" encoding="UTF-8"?>\n<config>\n  <header>\n    <header_item key="X-BBL-Client-Type" value="slicer"/>\n    <header_item key="X-BBL-Client-Version" value="01.09.00.70"/>\n  </header>\n</config>\n'
  t.same(readThreeMfMetadata({ sliceInfo: headerOnly, projectSettings: bambuSettings, modelHead: modelHead('BambuStudio-01.09.00.70') }), expected, 'a slice_info with only its header, as Bambu Studio saves an unsliced project')
  t.same(readThreeMfMetadata({}), {
    metadata: { slicer: null, slicer_version: null, printer_model: null, printer_model_id: null, nozzle_diameter: null, bed_type: null, estimated_seconds: null, weight_g: null, plates: [] },
    project_filaments: [],
    activePlateNumber: null,
  }, 'nothing at all is still a valid (empty) answer')
  const twoNozzles = readThreeMfMetadata({ projectSettings: JSON.stringify({ printer_model: 'Bambu Lab H2D', nozzle_diameter: ['0.4', '0.6'] }) })
  t.match(twoNozzles.metadata, { printer_model: 'Bambu Lab H2D', nozzle_diameter: 0.4, nozzle_diameters: [0.4, 0.6] })
  t.match(readThreeMfMetadata({ sliceInfo: bambuSliceInfo, projectSettings: '{"printer_model": "Bambu Lab P1S", trunc' }), { metadata: { printer_model: null, estimated_seconds: 3723 }, activePlateNumber: 1 }, 'damaged settings are ignored; slice_info still counts')
})

// ---------------------------------------------------------------- G-code

t.test('slicer metadata - a PrusaSlicer MK4 G-code: header and footer, edges cut mid-line', async (t) => {
  const petg = { id: '1', type: 'PETG', color_hex: '#FF8000', color_rgba: 'FF8000FF', used_m: 1.23, used_g: 3.69 }
  t.same(readGcodeMetadata(prusaHead, prusaTail), {
    metadata: {
      slicer: 'PrusaSlicer',
      slicer_version: '2.7.1+linux-x64-GTK3',
      printer_model: 'MK4',
      printer_model_id: null,
      nozzle_diameter: 0.4,
      bed_type: null,
      estimated_seconds: 3723,
      weight_g: 3.69,
      plates: [{ index: 1, estimated_seconds: 3723, weight_g: 3.69, filaments: [petg] }],
    },
    project_filaments: [petg],
    activePlateNumber: 1,
  } satisfies SlicerMetadata)
})

t.test('slicer metadata - PrusaSlicer with two extruders: slots stay in place, the idle one left out', async (t) => {
  const tail = `\n; filament used [mm] = 0, 837.20\n; filament used [g] = 0, 2.50\n; total filament used [g] = 2.50\n; estimated printing time (normal mode) = 45s\n` +
    `; prusaslicer_config = begin\n; filament_colour = #FF8000;#ffffff\n; filament_type = PETG;PLA\n; nozzle_diameter = 0.4,0.6\n; printer_model = XL2\n; prusaslicer_config = end\n`
  const result = readGcodeMetadata('; generated by PrusaSlicer 2.8.0 on 2024-08-01 at 10:00:00 UTC\n', tail)
  t.same(result.project_filaments, [{ id: '2', type: 'PLA', color_hex: '#FFFFFF', color_rgba: 'FFFFFFFF', used_m: 0.84, used_g: 2.5 }])
  t.match(result.metadata, { printer_model: 'XL2', nozzle_diameter: 0.4, nozzle_diameters: [0.4, 0.6], estimated_seconds: 45, weight_g: 2.5 })
})

t.test('slicer metadata - an OrcaSlicer G-code, with LF and with CRLF line ends alike', async (t) => {
  const petg = { id: '1', type: 'PETG', color_hex: '#2850E0', color_rgba: '2850E0FF', used_m: 4.51, used_g: 13.46 }
  const expected: SlicerMetadata = {
    metadata: {
      slicer: 'OrcaSlicer',
      slicer_version: '2.1.1',
      printer_model: 'Voron 2.4 350',
      printer_model_id: null,
      nozzle_diameter: 0.4,
      bed_type: 'Textured PEI Plate',
      estimated_seconds: 8140,
      weight_g: 13.46,
      plates: [{ index: 1, estimated_seconds: 8140, weight_g: 13.46, filaments: [petg] }],
    },
    project_filaments: [petg],
    activePlateNumber: 1,
  }
  t.same(readGcodeMetadata(orcaHead, orcaTail), expected)
  t.same(readGcodeMetadata(crlf(orcaHead), crlf(orcaTail)), expected, 'CRLF')
})

t.test('slicer metadata - a Bambu Studio plate G-code header: two AMS slots by number, the total with preparation', async (t) => {
  const head = bambuPlateHead
    .replace('; total filament length [mm] : 3910.00', '; total filament length [mm] : 3910.00,690.40')
    .replace('; total filament weight [g] : 11.66', '; total filament weight [g] : 11.66,2.10\n; filament: 1,3')
    .replace('; filament_colour = #FFFFFF;#F72323', '; filament_colour = #FFFFFF;#F72323;#00AE42FF')
    .replace('; filament_type = PLA;PETG', '; filament_type = PLA;PETG;PLA') +
    '; machine_start_gcode = ;===== machine: P1S ====\\nM17 S\\nM1002 set_gcode_claim_spe'
  const white = { id: '1', type: 'PLA', color_hex: '#FFFFFF', color_rgba: 'FFFFFFFF', used_m: 3.91, used_g: 11.66 }
  const green = { id: '3', type: 'PLA', color_hex: '#00AE42', color_rgba: '00AE42FF', used_m: 0.69, used_g: 2.1 }
  t.same(readGcodeMetadata(head, ''), {
    metadata: {
      slicer: 'BambuStudio',
      slicer_version: '01.09.00.70',
      printer_model: 'Bambu Lab P1S',
      printer_model_id: null,
      nozzle_diameter: 0.4,
      bed_type: 'Textured PEI Plate',
      estimated_seconds: 3723,
      weight_g: 13.76,
      plates: [{ index: 1, estimated_seconds: 3723, weight_g: 13.76, filaments: [white, green] }],
    },
    project_filaments: [white, green],
    activePlateNumber: 1,
  } satisfies SlicerMetadata)
  t.same(readGcodeMetadata(bambuPlateHead, '').project_filaments, [], 'one weight, two configured slots and no slot list (01.09 writes none): no guess')
  const single = bambuPlateHead.replace('; filament_colour = #FFFFFF;#F72323', '; filament_colour = #FFFFFF').replace('; filament_type = PLA;PETG', '; filament_type = PLA')
  t.same(readGcodeMetadata(single, '').project_filaments, [white], 'one weight, one configured slot: slot 1')
})

t.test('slicer metadata - durations as the slicers print them', async (t) => {
  const seconds = (time: string): number | null => readGcodeMetadata(`; estimated printing time (normal mode) = ${time}\n`, '').metadata.estimated_seconds
  t.equal(seconds('1d 2h 3m 4s'), 93_784)
  t.equal(seconds('2h 3m'), 7380)
  t.equal(seconds('3m 0s'), 180)
  t.equal(seconds('45s'), 45)
  t.equal(seconds('99999999d 0h 0m 0s'), null, 'past any real print')
  t.equal(seconds('soon'), null)
  t.equal(seconds(''), null)
})

// ---------------------------------------------------------------- hostile input

t.test('slicer metadata - hostile slice_info: an error naming what is wrong, never an expanded entity', async (t) => {
  t.equal(failure(() => readThreeMfMetadata({ sliceInfo: 'not xml <' })), 'slice_info.config is not well-formed XML')
  t.equal(failure(() => readThreeMfMetadata({ sliceInfo: '<config><plate></config>' })), 'slice_info.config is not well-formed XML')
  t.equal(failure(() => readThreeMfMetadata({ sliceInfo: '<settings><plate/></settings>' })), 'slice_info.config has no <config> element')
  const started = Date.now()
  const deep = '<config>' + '<plate>'.repeat(10_000) + '</plate>'.repeat(10_000) + '</config>'
  t.equal(failure(() => readThreeMfMetadata({ sliceInfo: deep })), 'slice_info.config is nested too deeply')
  const bomb =
    '<?xml version="1.0"?><!DOCTYPE config [<!ENTITY a "aaaaaaaaaa"><!ENTITY b "&a;&a;&a;&a;&a;&a;&a;&a;&a;&a;"><!ENTITY c "&b;&b;&b;&b;&b;&b;&b;&b;&b;&b;">]>' +
    '<config><plate><metadata key="index" value="1"/><filament id="1" type="&c;" color="#FFFFFF" used_m="1" used_g="1"/></plate></config>'
  t.equal(failure(() => readThreeMfMetadata({ sliceInfo: bomb })), 'slice_info.config declares a DOCTYPE, which no slicer writes')
  const undeclared = '<config><plate><filament id="1" type="&c;PLA&amp;CF" color="#FFFFFF" used_m="1" used_g="1"/></plate></config>'
  t.equal(readThreeMfMetadata({ sliceInfo: undeclared }).project_filaments[0]?.type, '&c;PLA&CF', 'an undeclared entity stays as written; only the predefined five are decoded')
  t.ok(Date.now() - started < 5000, 'in bounded time')
})

t.test('slicer metadata - floods of elements are capped: 64 filaments a plate, 256 plates', async (t) => {
  const started = Date.now()
  let filaments = ''
  for (let id = 1; id <= 100_000; id++) filaments += `<filament id="${id}" type="PLA" color="#FFFFFF" used_m="1" used_g="1"/>`
  const many = readThreeMfMetadata({ sliceInfo: `<config><plate><metadata key="index" value="1"/>${filaments}</plate></config>` })
  t.equal(many.project_filaments.length, 64)
  t.same(many.project_filaments.map((f) => f.id), Array.from({ length: 64 }, (_, i) => String(i + 1)), 'the first 64, in order')
  t.equal(many.metadata.weight_g, 64, 'the weight sums what was kept')
  const plates = Array.from({ length: 300 }, (_, i) => `<plate><metadata key="index" value="${i + 1}"/><metadata key="prediction" value="60"/></plate>`).join('')
  const result = readThreeMfMetadata({ sliceInfo: `<config>${plates}</config>` })
  t.equal(result.metadata.plates.length, 256)
  t.equal(result.metadata.plates.at(-1)?.index, 256)
  t.ok(Date.now() - started < 10_000, 'in bounded time')
})

t.test('slicer metadata - absurd numbers are dropped: exponents, signs, NaN, Infinity; unreadable colours read as black', async (t) => {
  const info = `<config><plate>
    <metadata key="index" value="-1"/><metadata key="prediction" value="1e400"/><metadata key="weight" value="-5"/><metadata key="nozzle_diameters" value="NaN"/>
    <filament id="1" type="PLA" color="#FFFFFF" used_m="1" used_g="NaN"/>
    <filament id="2" type="PLA" color="#ABC" used_m="-5" used_g="2"/>
    <filament id="3" type="PLA" color="red" used_m="Infinity" used_g="1e400"/>
    <filament id="0x10" type="PLA" color="#FFFFFF" used_m="1" used_g="1"/>
    <filament id="4" type="" color="#12345678" used_m="100000000" used_g="0.004"/>
  </plate></config>`
  t.same(readThreeMfMetadata({ sliceInfo: info }).metadata, {
    slicer: null,
    slicer_version: null,
    printer_model: null,
    printer_model_id: null,
    nozzle_diameter: null,
    bed_type: null,
    estimated_seconds: null,
    weight_g: 2,
    plates: [{ index: 1, estimated_seconds: null, weight_g: 2, filaments: [{ id: '2', type: 'PLA', color_hex: '#000000', color_rgba: '000000FF', used_m: 0, used_g: 2 }] }],
  })
  const gcode = readGcodeMetadata('; generated by PrusaSlicer 2.7.1 on 2024-01-01 at 10:00:00 UTC\n', '\n; filament used [g] = NaN, -5, 1e400, 2.5\n; total filament used [g] = Infinity\n; nozzle_diameter = 0,-0.4,0.4\n')
  t.same(gcode.project_filaments.map((f) => [f.id, f.used_g]), [['4', 2.5]])
  t.equal(gcode.metadata.weight_g, 2.5, 'an unreadable total gives way to the sum of what is readable')
  t.equal(gcode.metadata.nozzle_diameter, 0.4, 'a zero or negative nozzle is no nozzle')
})

t.test('slicer metadata - G-code edges cut mid-line are dropped, not misread', async (t) => {
  const result = readGcodeMetadata(
    '; generated by PrusaSlicer 2.7.1 on 2024-01-01 at 10:00:00 UTC\n; printer_model = MK4S',
    '; estimated printing time (normal mode) = 9h 0m 0s\n; estimated printing time (normal mode) = 1h 0m 0s\n; total filament used [g] = 1.5',
  )
  t.equal(result.metadata.printer_model, null, 'the head ends inside a line')
  t.equal(result.metadata.estimated_seconds, 3600, "the tail's first line is part of a longer one")
  t.equal(result.metadata.weight_g, 1.5, "the tail's last line is the end of the file and counts")
})

t.test('slicer metadata - inputs of the wrong kind give the error too', async (t) => {
  t.equal(failure(() => readThreeMfMetadata(null as unknown as ThreeMfSources)), 'no 3MF sources were given')
  t.equal(failure(() => readThreeMfMetadata({ sliceInfo: 42 } as unknown as ThreeMfSources)), 'sliceInfo must be text')
  t.equal(failure(() => readThreeMfMetadata({ plateGcodeHeads: [[1, 'x']] } as unknown as ThreeMfSources)), 'plateGcodeHeads must be a Map of plate numbers to text')
  t.equal(failure(() => readGcodeMetadata(undefined as unknown as string, '')), 'the G-code head and tail must be text')
})

// ---------------------------------------------------------------- seeded mutations

/** mulberry32: small, seeded, the same sequence on every run. */
function prng(seed: number): (below: number) => number {
  let state = seed >>> 0
  return (below) => {
    state = (state + 0x6d2b79f5) >>> 0
    let x = state
    x = Math.imul(x ^ (x >>> 15), x | 1)
    x ^= x + Math.imul(x ^ (x >>> 7), x | 61)
    return (((x ^ (x >>> 14)) >>> 0) % below)
  }
}

function mutate(text: string, random: (below: number) => number): string {
  let out = text
  const edits = 1 + random(6)
  for (let i = 0; i < edits; i++) {
    const at = random(out.length + 1)
    switch (random(5)) {
      case 0:
        out = out.slice(0, at) + out.slice(at + 1 + random(8))
        break
      case 1:
        out = out.slice(0, at) + '<>&;="\n\r#-.0123456789e'[random(22)]! + out.slice(at)
        break
      case 2:
        out = out.slice(0, at) + String.fromCharCode(random(0x3000)) + out.slice(at)
        break
      case 3:
        out = out.slice(0, at) + out.slice(at, at + random(200)).repeat(1 + random(3)) + out.slice(at)
        break
      default:
        out = out.slice(0, at)
    }
  }
  return out
}

/** What every result must satisfy, however broken its input. */
function sane(t: Test, result: SlicerMetadata): void {
  const count = (n: number | null): boolean => n === null || (Number.isFinite(n) && n >= 0)
  const { metadata } = result
  const filamentsOk = (list: SlicerMetadata['project_filaments']): boolean =>
    list.length <= 64 && list.every((f) => /^#[0-9A-F]{6}$/.test(f.color_hex) && /^[0-9A-F]{8}$/.test(f.color_rgba) && f.used_g > 0 && count(f.used_m) && /^\d+$/.test(f.id))
  const ok =
    metadata.plates.length <= 256 &&
    count(metadata.estimated_seconds) &&
    count(metadata.weight_g) &&
    count(metadata.nozzle_diameter) &&
    metadata.plates.every((p) => Number.isInteger(p.index) && count(p.estimated_seconds) && count(p.weight_g) && filamentsOk(p.filaments)) &&
    filamentsOk(result.project_filaments) &&
    (result.activePlateNumber === null) === (metadata.plates.length === 0)
  if (!ok) t.fail('a result out of shape', { result })
}

t.test('slicer metadata - 600 seeded mutations of the fixtures give a SlicerMetadataError or a sane result', async (t) => {
  const random = prng(0x5eed)
  const threeMf: ThreeMfSources[] = [
    { sliceInfo: bambuSliceInfo, projectSettings: bambuSettings, modelHead: modelHead('BambuStudio-01.09.00.70'), plateGcodeHeads: new Map([[1, bambuPlateHead]]) },
    { sliceInfo: orcaSliceInfo, projectSettings: orcaSettings, modelHead: modelHead('BambuStudio-2.3.1'), plateGcodeHeads: new Map([[1, orcaPlateHead(1, '1h 30m 21s')], [2, orcaPlateHead(2, '32m 0s')]]) },
  ]
  const gcode: [string, string][] = [[prusaHead, prusaTail], [orcaHead, orcaTail], [bambuPlateHead, '']]
  let results = 0
  let errors = 0
  for (let i = 0; i < 600; i++) {
    try {
      if (i % 2 === 0) {
        const base = threeMf[random(threeMf.length)]!
        const heads = new Map([...(base.plateGcodeHeads ?? new Map<number, string>())].map(([n, text]) => [n, random(3) === 0 ? mutate(text, random) : text] as const))
        sane(t, readThreeMfMetadata({
          sliceInfo: random(2) === 0 ? mutate(base.sliceInfo!, random) : base.sliceInfo,
          projectSettings: random(3) === 0 ? mutate(base.projectSettings!, random) : base.projectSettings,
          modelHead: random(3) === 0 ? mutate(base.modelHead!, random) : base.modelHead,
          plateGcodeHeads: heads,
        }))
      } else {
        const [head, tail] = gcode[random(gcode.length)]!
        sane(t, readGcodeMetadata(mutate(head, random), mutate(tail, random)))
      }
      results++
    } catch (error) {
      if (!(error instanceof SlicerMetadataError)) throw error
      t.notMatch(error.message, /unexpected/, 'a foreseen failure, not a bug caught by the last guard')
      errors++
    }
  }
  t.equal(results + errors, 600)
  t.ok(results > 300, `most mutations still read (${results} results, ${errors} errors)`)
})
