"""Run by Blender (blender -b --python make_shot.py -- OUT.blend TEXTURE OUTSIDE_TEXTURE): a
small Cycles scene whose two materials read external image files -- one by a relative path
inside the .blend's folder (a name with spaces and brackets), one by an absolute path outside
it -- saved as OUT.blend."""

import sys

import bpy

out, texture, outside = sys.argv[sys.argv.index("--") + 1:][:3]
bpy.context.preferences.filepaths.use_relative_paths = False
scene = bpy.context.scene
for obj in list(bpy.data.objects):
    bpy.data.objects.remove(obj)


def textured(name, path):
    mat = bpy.data.materials.new(name)
    mat.use_nodes = True
    tex = mat.node_tree.nodes.new("ShaderNodeTexImage")
    tex.image = bpy.data.images.load(path)
    mat.node_tree.links.new(tex.outputs["Color"],
                            mat.node_tree.nodes["Principled BSDF"].inputs["Base Color"])
    return mat


bpy.ops.mesh.primitive_plane_add(size=6)
bpy.context.object.data.materials.append(textured("ground", texture))
bpy.ops.mesh.primitive_uv_sphere_add(radius=1, location=(-0.6, 0, 1))
sphere = bpy.context.object
sphere.data.materials.append(textured("ball", outside))
sphere.keyframe_insert("location", frame=1)
sphere.location = (0.6, 0, 1)
sphere.keyframe_insert("location", frame=2)
bpy.ops.object.light_add(type="SUN", location=(2, -2, 4))
bpy.ops.object.camera_add(location=(0, -7, 3), rotation=(1.2, 0, 0))
scene.camera = bpy.context.object
scene.render.engine = "CYCLES"
scene.render.resolution_x = 64
scene.render.resolution_y = 48
scene.render.resolution_percentage = 100
scene.frame_start, scene.frame_end = 1, 2
scene.cycles.samples = 16
scene.cycles.seed = 0
bpy.ops.wm.save_as_mainfile(filepath=out, relative_remap=False)
# The texture inside the folder by its relative path; the other stays absolute.
bpy.data.images[bpy.path.basename(texture)].filepath = bpy.path.relpath(texture)
bpy.ops.wm.save_as_mainfile(filepath=out, relative_remap=False)
